//! The shipped set separates a model from a keyword list (docs/quality.md, "How the set is made
//! hard"): a list written from the labelling rules in evals/README.md, a handful of words per
//! department in English, Portuguese and Spanish, scores at most 70% department accuracy on the
//! test split (82.5% on version 1 of the set, 81% in the audit of issue 29).

use triage::providers::Policy;
use triage::quality::set::{LabelledSet, Split, SHIPPED};

/// The words, from the README's definitions. The department with the most occurrences wins;
/// ties go to the earlier department; no word at all is general.
const KEYWORDS: &[(&str, &[&str])] = &[
    (
        "billing",
        &[
            "invoice",
            "refund",
            "charge",
            "receipt",
            "payment",
            "billing",
            "tax",
            "vat",
            "card",
            "bill",
            "debit",
            "fatura",
            "factura",
            "nota fiscal",
            "reembolso",
            "estorno",
            "cobran",
            "cobrad",
            "recibo",
            "pagamento",
            "cartão",
            "boleto",
            "pix",
            "débito",
            "cnpj",
            "nif",
            "cif",
            "cobro",
            "cobrado",
            "devolución",
            "pago",
            "tarjeta",
        ],
    ),
    (
        "account",
        &[
            "login",
            "log in",
            "password",
            "2fa",
            "two-factor",
            "sso",
            "sign in",
            "access",
            "user",
            "profile",
            "owner",
            "locked",
            "verification",
            "hacked",
            "delete my account",
            "personal data",
            "gdpr",
            "senha",
            "acesso",
            "usuário",
            "perfil",
            "titular",
            "verificação",
            "invadid",
            "dados pessoais",
            "rgpd",
            "contraseña",
            "acceso",
            "usuario",
            "iniciar sesión",
            "verificación",
            "hackead",
            "datos personales",
        ],
    ),
    (
        "technical",
        &[
            "error",
            "bug",
            "outage",
            "down",
            "slow",
            "crash",
            "integration",
            "api",
            "webhook",
            "missing",
            "performance",
            "export",
            "sync",
            "timeout",
            "404",
            "500",
            "502",
            "503",
            "429",
            "401",
            "erro",
            "fora do ar",
            "lento",
            "lenta",
            "falha",
            "integração",
            "caída",
            "caído",
            "fallo",
            "integración",
            "no funciona",
            "lentitud",
        ],
    ),
    (
        "sales",
        &[
            "plan",
            "quote",
            "upgrade",
            "downgrade",
            "trial",
            "discount",
            "partner",
            "demo",
            "pricing",
            "price",
            "how much",
            "seats",
            "licen",
            "enterprise",
            "resell",
            "nonprofit",
            "education",
            "plano",
            "orçamento",
            "desconto",
            "teste",
            "demonstração",
            "parceria",
            "preço",
            "quanto custa",
            "revend",
            "ong",
            "presupuesto",
            "descuento",
            "prueba",
            "demostración",
            "precio",
            "cuánto cuesta",
        ],
    ),
    (
        "general",
        &[
            "feedback",
            "thank",
            "feature",
            "suggest",
            "compliance",
            "mistake",
            "great job",
            "hiring",
            "press",
            "certific",
            "address",
            "holiday",
            "privacy",
            "sugestão",
            "obrigad",
            "elogio",
            "engano",
            "contratando",
            "feriado",
            "privacidade",
            "sugerencia",
            "gracias",
            "felicit",
            "horario",
        ],
    ),
];

fn classify(subject: &str, message: &str) -> &'static str {
    let text = format!("{subject} {message}").to_lowercase();
    let mut best = ("general", 0);
    for (department, words) in KEYWORDS {
        let hits = words.iter().map(|w| text.matches(w).count()).sum::<usize>();
        if hits > best.1 {
            best = (department, hits);
        }
    }
    best.0
}

#[test]
fn a_keyword_list_from_the_labelling_rules_scores_at_most_70_percent_on_test() {
    let set = LabelledSet::parse(SHIPPED, &Policy::load("policy-v1").unwrap()).unwrap();
    for split in [Split::Dev, Split::Test] {
        let rows = set.rows_of(Some(split));
        let right = rows
            .iter()
            .filter(|r| classify(&r.subject, &r.message) == r.department)
            .count();
        let accuracy = right as f64 / rows.len() as f64;
        println!(
            "keyword list, {split}: {right}/{} = {accuracy:.3}",
            rows.len()
        );
        if split == Split::Test {
            assert!(
                accuracy <= 0.70,
                "the keyword list scores {accuracy:.3} on test"
            );
            assert!(accuracy >= 0.50, "the list is a fair one ({accuracy:.3})");
        }
    }
}
