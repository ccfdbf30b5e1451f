//! Synthetic tickets for the tests: several phrasings per department in English, Portuguese
//! and Spanish, words shared across departments ("account", "plan", "error"), openings and
//! closings shared by all, urgency independent of the department, and on demand label
//! noise, tickets that mix two departments, typos, and paraphrases kept out of training, so
//! a model must generalise rather than look a sentence up.

use super::{fit::SplitMix64, Example};

pub(super) const DEPARTMENTS: [&str; 5] = ["billing", "technical", "account", "sales", "general"];

pub(super) fn departments() -> Vec<String> {
    DEPARTMENTS.iter().map(|d| d.to_string()).collect()
}

const SUBJECTS: [&[&str]; 5] = [
    &[
        "Charged twice",
        "Refund request",
        "Invoice problem",
        "Cobrança indevida",
        "Factura incorrecta",
        "Payment issue",
    ],
    &[
        "App crashing",
        "Error on upload",
        "Site very slow",
        "Erro no sistema",
        "La aplicación falla",
        "Sync broken",
    ],
    &[
        "Can't log in",
        "Password reset",
        "Locked out",
        "Não consigo entrar",
        "Cambiar mi correo",
        "2FA not working",
    ],
    &[
        "Pricing question",
        "Quote for seats",
        "Enterprise demo",
        "Orçamento",
        "Cotización",
        "Upgrade plan",
    ],
    &[
        "Office hours",
        "Feedback",
        "Documentation",
        "Dúvida geral",
        "Una pregunta",
        "Thank you",
    ],
];

const GENERIC_SUBJECTS: &[&str] = &[
    "Help",
    "Question",
    "Hello",
    "Re: my ticket",
    "Support",
    "Ajuda",
    "Hola",
];

/// The last [`UNSEEN`] of each are paraphrases of the others, kept for `Recipe::unseen`.
const CORES: [&[&str]; 5] = [
    &[
        "I was charged twice for my {plan} subscription this month",
        "my invoice for {month} shows the wrong amount, {amount} instead of the usual",
        "please refund the {amount} you took from my card",
        "the payment for order {number} failed but the money left my account anyway",
        "why did my bill go up to {amount} without notice",
        "fui cobrado duas vezes na fatura de {month}",
        "quero o estorno de {amount} cobrado no meu cartão",
        "necesito un reembolso del cargo de {amount}",
        "the credit card on file was billed again after I cancelled",
        "can you send a receipt for the last payment of {amount}",
        "there are two identical charges on my statement",
        "I need my money back for the {month} invoice",
    ],
    &[
        "the app crashes every time I open the {feature} page",
        "I get error {code} when I upload a file",
        "the dashboard has been very slow since the last update",
        "the API returns a timeout for every request we send",
        "sync between the mobile app and the web stopped working",
        "o aplicativo trava quando abro a tela de {feature}",
        "la página muestra un error {code} al guardar los cambios",
        "exports to CSV come out empty",
        "notifications are not arriving anymore on android",
        "the {feature} screen stays blank after the login",
        "uploading any file fails with code {code}",
        "the website got really slow after your update",
    ],
    &[
        "I cannot log in to my account with my usual password",
        "I forgot my password and the reset email never arrives",
        "please change the email address on my profile",
        "my account was locked after too many sign in attempts",
        "the two-factor code is not accepted",
        "how do I delete my user and all my data",
        "não consigo acessar minha conta, a senha não funciona",
        "olvidé mi contraseña y no puedo entrar",
        "add a new user to our team workspace please",
        "I want to change the username on my account",
        "the password reset link never shows up in my inbox",
        "I'm locked out of my account after several login attempts",
    ],
    &[
        "what does the {plan} plan cost for {number} seats",
        "can we get a quote for an annual contract",
        "I would like a demo of the enterprise features",
        "do you offer a discount for nonprofits or schools",
        "we want to upgrade from {plan} to the enterprise plan",
        "quanto custa o plano {plan} para a minha empresa",
        "quisiera una cotización para {number} usuarios",
        "is there a free trial before we buy",
        "who can I talk to about volume licensing",
        "we are comparing vendors and need your price list",
        "how much would the {plan} plan be for {number} users",
        "please send pricing for an annual contract",
    ],
    &[
        "what are your office hours",
        "where can I find the documentation for beginners",
        "I have a suggestion to make the product better",
        "just wanted to say thanks for the help last week",
        "do you have a newsletter I can subscribe to",
        "qual é o horário de atendimento de vocês",
        "¿dónde está la guía de usuario?",
        "how do I contact your press team",
        "is there a community forum or user group",
        "are you hiring, and where do I send a CV",
        "when is your support team available, what hours",
        "is there documentation or a user guide I can read",
    ],
];

const OPENINGS: &[&str] = &[
    "",
    "Hi,",
    "Hello team,",
    "Good morning.",
    "Olá,",
    "Hola,",
    "Dear support,",
    "Hey there,",
];
const CLOSINGS: &[&str] = &[
    "",
    "Thanks.",
    "Regards, {name}",
    "Obrigado",
    "Gracias, {name}",
    "Best,",
    "Cheers",
];
const URGENT: &[&str] = &[
    "This is urgent!",
    "Please fix this ASAP.",
    "We need this resolved immediately.",
    "É urgente, por favor!",
    "Es urgente, necesito ayuda ya.",
    "Our whole team is blocked right now.",
    "Today is our deadline, please hurry!",
];
const CALM: &[&str] = &[
    "No rush.",
    "Whenever you have a moment.",
    "Sem pressa.",
    "Cuando puedan.",
    "",
];
/// Urgency a reader could take either way: labelled urgent half the time.
const SOFT: &[&str] = &[
    "Could you look at this today?",
    "A quick answer would help.",
    "Hoje se possível.",
];

const SLOTS: &[(&str, &[&str])] = &[
    ("{plan}", &["basic", "pro", "team", "premium"]),
    ("{month}", &["March", "April", "maio", "junio", "October"]),
    (
        "{amount}",
        &["$49.90", "R$ 120,00", "€30", "$1,200", "US$ 9"],
    ),
    ("{number}", &["12", "250", "4817", "90210", "7"]),
    ("{code}", &["500", "403", "E1042", "502", "timeout-7"]),
    (
        "{feature}",
        &["reports", "settings", "relatórios", "calendar", "export"],
    ),
    ("{name}", &["Ana", "João", "Mike", "Lucía", "Priya"]),
];

/// What to add to the plain tickets.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Recipe {
    /// Only the paraphrases no other recipe uses, under a generic subject: tickets put in
    /// words the model has not seen in that order.
    pub unseen: bool,
    /// Chance a label (department, urgency, each) is replaced by a coin toss.
    pub noise: f64,
    /// Chance a ticket mixes two departments' sentences (labelled either), and, separately,
    /// that its urgency is soft (labelled either).
    pub ambiguous: f64,
    /// Chance a word longer than three letters loses or swaps a letter.
    pub typos: f64,
}

pub(super) fn tickets(count: usize, seed: u64, recipe: Recipe) -> Vec<Example> {
    let mut rng = Rng(SplitMix64(seed));
    (0..count).map(|_| ticket(&mut rng, recipe)).collect()
}

fn ticket(rng: &mut Rng, recipe: Recipe) -> Example {
    let class = rng.below(DEPARTMENTS.len());
    let mut department = class;
    let mut core = rng.pick(phrasings(class, recipe)).to_string();
    if rng.chance(recipe.ambiguous) {
        let other = (class + 1 + rng.below(DEPARTMENTS.len() - 1)) % DEPARTMENTS.len();
        core = format!("{core}, and also {}", rng.pick(phrasings(other, recipe)));
        if rng.chance(0.5) {
            department = other;
        }
    }
    let (urgency, mut is_urgent) = if rng.chance(recipe.ambiguous) {
        (rng.pick(SOFT), rng.chance(0.5))
    } else if rng.chance(0.3) {
        (rng.pick(URGENT), true)
    } else {
        (rng.pick(CALM), false)
    };
    if rng.chance(recipe.noise) {
        department = rng.below(DEPARTMENTS.len());
    }
    if rng.chance(recipe.noise) {
        is_urgent = rng.chance(0.5);
    }
    let subject = if !recipe.unseen && rng.chance(0.75) {
        rng.pick(SUBJECTS[class])
    } else {
        rng.pick(GENERIC_SUBJECTS)
    };
    let message = [rng.pick(OPENINGS), &core, ".", urgency, rng.pick(CLOSINGS)].join(" ");
    let message = fill_slots(rng, &message);
    Example {
        subject: typos(rng, subject, recipe.typos),
        message: typos(rng, &message, recipe.typos),
        department: DEPARTMENTS[department].to_string(),
        is_urgent,
        weight: 1.0,
    }
}

const UNSEEN: usize = 2;

fn phrasings(class: usize, recipe: Recipe) -> &'static [&'static str] {
    let cores = CORES[class];
    let split = cores.len() - UNSEEN;
    if recipe.unseen {
        &cores[split..]
    } else {
        &cores[..split]
    }
}

fn fill_slots(rng: &mut Rng, text: &str) -> String {
    let mut text = text.to_string();
    for (slot, values) in SLOTS {
        while text.contains(slot) {
            text = text.replacen(slot, rng.pick(values), 1);
        }
    }
    text
}

fn typos(rng: &mut Rng, text: &str, rate: f64) -> String {
    let words = text.split(' ').map(|word| {
        let mut chars: Vec<char> = word.chars().collect();
        if chars.len() > 3 && rng.chance(rate) {
            let at = 1 + rng.below(chars.len() - 2);
            if rng.chance(0.5) {
                chars.remove(at);
            } else {
                chars.swap(at, at - 1);
            }
        }
        chars.into_iter().collect::<String>()
    });
    words.collect::<Vec<_>>().join(" ")
}

struct Rng(SplitMix64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0.below(n)
    }

    fn chance(&mut self, p: f64) -> bool {
        ((self.0.next_u64() >> 11) as f64 / (1u64 << 53) as f64) < p
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}
