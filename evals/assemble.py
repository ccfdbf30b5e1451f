#!/usr/bin/env python3
"""Assembles evals/tickets.jsonl from the hand-written tickets in base_*.py and writes the
counts into evals/README.md. Deterministic (fixed seed): running it twice gives the same bytes,
so the set's SHA-256 digest only changes when a ticket does.

Every ticket's text is written by hand in base_*.py. The script adds what real inboxes add
around them: signatures, forwarded headers, follow-ups quoting the first message, duplicates
that differ only in whitespace or case, two tickets sent as one, and a few long pastes.

Every ticket belongs to a scenario family (a base ticket with its translations, paraphrases,
forwards, follow-ups and duplicates): the slug written by hand as the first field of each base
ticket, prefixed `fam-`. A family's split is a function of its id alone (split_of), so adding
tickets never moves one, and no family spans both splits. Row ids are
`{family}-{lang}[-{variant}]`, then `-sig`, `-fwd`, `-re`, `-dup` or `-log` for derived rows.
Usage: python3 evals/assemble.py
"""
import hashlib
import json
import random
import re
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from base_en import EN, EN_SHORT, EN_SARCASM, EN_INJECTION, EN_MULTI  # noqa: E402
from base_pt import PT, PT_SHORT, PT_SARCASM, PT_INJECTION, PT_MULTI  # noqa: E402
from base_es import ES, ES_SHORT, ES_SARCASM, ES_INJECTION, ES_MULTI  # noqa: E402
from base_hard_en import HARD_EN, HARD_EN_URGENT  # noqa: E402
from base_hard_pt import HARD_PT, HARD_PT_URGENT  # noqa: E402
from base_hard_es import HARD_ES, HARD_ES_URGENT  # noqa: E402

rng = random.Random(20261201)

SIGNATURES = {
    "en": [
        "\n\n--\nSarah Whitfield\nHead of Customer Operations | Northwind Traders\n+44 20 7946 0958\nThis email and any attachments are confidential. If you received it in error, please delete it.",
        "\n\nSent from my iPhone",
        "\n\nBest,\nMarcus\n\nMarcus Lee · IT Manager · Kestrel Labs\nkestrel-labs.io",
        "\n\nThanks,\nDana Ortiz\nOperations Lead\nBlue Fin Outfitters\n\nPlease consider the environment before printing this email.",
        "\n\nCheers,\nTom\n--\nTom Ashby | Finance\nGreenleaf Organics Ltd, Unit 4, Mill Lane, Leeds LS1 4AB",
        "\n\nRegards,\nA. Nakamura\n\n[cid:image001.png@01DA1F2C.5B8E7A30]",
        "\n\nKind regards\nHelen\n\nHelen Fraser\nOffice Manager\nT: 0131 496 0123\nOur office is closed on Fridays.",
    ],
    "pt": [
        "\n\nAtt,\nCarla Mendes\nCoordenadora de Atendimento | Mercadinho Bom Preço\n(11) 98765-4321",
        "\n\nEnviado do meu iPhone",
        "\n\nObrigado,\nRafael Souza\nTI - Construtora Horizonte\n\nEsta mensagem pode conter informação confidencial. Se não for o destinatário, apague-a.",
        "\n\nCumprimentos,\nAna Rita Lopes\nDepartamento Financeiro\nTel.: +351 21 123 4567",
        "\n\nAbraço,\nThiago\n\nEnviado do Outlook para Android",
        "\n\n--\nFernanda Lima | Financeiro\nLojas Aurora S.A. | www.lojasaurora.com.br",
    ],
    "es": [
        "\n\nSaludos,\nJavier Romero\nResponsable de Soporte | Ferretería Central\nTel. 91 123 45 67",
        "\n\nEnviado desde mi iPhone",
        "\n\nUn saludo,\nMarta\n\nEste mensaje es confidencial. Si lo ha recibido por error, elimínelo.",
        "\n\nAtentamente,\nLic. Andrea Gómez\nAdministración - Grupo Altamira, CDMX",
    ],
}

FORWARD = {
    "en": ("Can someone on your side look at this? Forwarding what the customer sent us.\n\n---------- Forwarded message ---------\nFrom: {name} <{email}>\nDate: {date}\nSubject: {subject}\nTo: support@ourcompany.com\n\n{message}",
           ["FYI, see below.\n\n", "Forwarding this from our helpdesk inbox.\n\n", ""]),
    "pt": ("Pessoal, podem ver isto? Encaminho a mensagem que recebemos.\n\n---------- Mensagem encaminhada ---------\nDe: {name} <{email}>\nData: {date}\nAssunto: {subject}\nPara: suporte@nossaempresa.com.br\n\n{message}",
           ["Segue abaixo.\n\n", "Encaminhando do nosso e-mail de suporte.\n\n", ""]),
    "es": ("¿Podéis revisar esto? Reenvío lo que nos escribió el cliente.\n\n---------- Mensaje reenviado ---------\nDe: {name} <{email}>\nFecha: {date}\nAsunto: {subject}\nPara: soporte@nuestraempresa.es\n\n{message}",
           ["Os reenvío lo de abajo.\n\n", ""]),
}
SENDERS = [("Laura Becker", "laura.becker@example.org"), ("Pedro Alves", "pedro.alves@example.com.br"),
           ("Chen Wei", "chen.wei@example.net"), ("Joana Ferreira", "jferreira@example.pt"),
           ("Diego Ramírez", "dramirez@example.mx"), ("Olivia Grant", "ogrant@example.co.uk")]
DATES = ["Mon, 3 Nov 2026 at 09:14", "Tue, 11 Nov 2026 at 16:02", "Fri, 14 Nov 2026 at 08:47",
         "Wed, 19 Nov 2026 at 13:30", "Thu, 27 Nov 2026 at 18:55"]

FOLLOW_UP = {
    "en": ["Any update on this? It's been two days.", "Following up — still waiting on a reply.",
           "Hello? Is anyone looking at this?", "Bumping this. Please reply.",
           "Second time asking. Can someone please respond?"],
    "pt": ["Alguma novidade? Já faz dois dias.", "Reforçando o pedido abaixo, ainda sem resposta.",
           "Olá? Alguém está vendo isto?", "Boa tarde, continuo aguardando retorno."],
    "es": ["¿Alguna novedad? Ya van dos días.", "Vuelvo a escribir porque no he tenido respuesta."],
}
WROTE = {"en": "On {date}, {name} wrote:", "pt": "Em {date}, {name} escreveu:", "es": "El {date}, {name} escribió:"}
RE = {"en": "Re: ", "pt": "Re: ", "es": "RE: "}

COMBINE = {
    "en": ("Two things while I have you.\n\n{a}\n\nAnd separately: {b}", "{sa} / {sb}"),
    "pt": ("Duas coisas.\n\n{a}\n\nE outra coisa: {b}", "{sa} + {sb}"),
    "es": ("Dos cosas.\n\n{a}\n\nY aparte: {b}", "{sa} y {sb}"),
}

LOG_LINE = "{ts} ERROR [sync-worker-{w}] order={o} status=failed reason=\"upstream 502 Bad Gateway\" retry={r}\n"


def split_of(family):
    """test when the first byte of SHA-256(family id) is below 141 (about 55%), else dev; the
    same function is in shared/src/operations/eval/set.rs's tests."""
    return "test" if hashlib.sha256(family.encode()).digest()[0] < 141 else "dev"


def bases():
    groups = [("en", EN + EN_SHORT + EN_SARCASM + EN_INJECTION + EN_MULTI + HARD_EN + HARD_EN_URGENT),
              ("pt", PT + PT_SHORT + PT_SARCASM + PT_INJECTION + PT_MULTI + HARD_PT + HARD_PT_URGENT),
              ("es", ES + ES_SHORT + ES_SARCASM + ES_INJECTION + ES_MULTI + HARD_ES + HARD_ES_URGENT)]
    out, seen, labels = [], Counter(), {}
    for lang, tickets in groups:
        for slug, dept, urgent, tags, subject, message in tickets:
            family = f"fam-{slug}"
            seen[(family, lang)] += 1
            variant = seen[(family, lang)]
            label = labels.setdefault(family, (dept, urgent))
            assert label == (dept, urgent), f"{family}: {label} and {(dept, urgent)} ({lang})"
            out.append(dict(id=f"{family}-{lang}" + (f"-{variant}" if variant > 1 else ""),
                            family=family, lang=lang, department=dept, is_urgent=urgent,
                            tags=list(tags), subject=subject, message=message,
                            split=split_of(family)))
    return out


def row(base, id_suffix, subject, message, extra_tags, **over):
    r = dict(id=f"{base['id']}-{id_suffix}", family=over.get("family", base["family"]),
             subject=subject, message=message,
             department=over.get("department", base["department"]),
             is_urgent=over.get("is_urgent", base["is_urgent"]),
             split=over.get("split", base["split"]),
             tags=sorted(set(base["tags"] + extra_tags + [f"lang:{base['lang']}"])))
    return r


def quoted(text):
    return "\n".join("> " + line if line else ">" for line in text.split("\n"))


def main():
    all_bases = bases()
    rows = [row(b, "0", b["subject"], b["message"], [])
            for b in all_bases]
    for r, b in zip(rows, all_bases):
        r["id"] = b["id"]
    plain = [b for b in all_bases if "short" not in b["tags"]]
    # Derived rows are drawn per split, in proportion to its tickets, with as many urgent ones
    # as bring each split's urgent share to the base tickets' share overall: the urgent share
    # is then about the same in dev and test although families fall where their ids hash.
    share = sum(b["is_urgent"] for b in all_bases) / len(all_bases)
    quota = {}
    for split in ["dev", "test"]:
        of = [b for b in all_bases if b["split"] == split]
        derived = round(250 * len(of) / len(all_bases))
        quota[split] = round(share * (len(of) + derived)) - sum(b["is_urgent"] for b in of)

    def draw(pool, n):
        out = []
        for split in ["dev", "test"]:
            of = [b for b in pool if b["split"] == split]
            k = round(n * len(of) / len(pool))
            urgent = min(max(round(quota[split] * n / 250), 0), k)
            out += rng.sample([b for b in of if b["is_urgent"]], urgent)
            out += rng.sample([b for b in of if not b["is_urgent"]], k - urgent)
        return out

    for b in draw(plain, 90):
        sig = rng.choice(SIGNATURES[b["lang"]])
        rows.append(row(b, "sig", b["subject"], b["message"] + sig, ["signature"]))
    for b in draw(plain, 60):
        template, notes = FORWARD[b["lang"]]
        name, email = rng.choice(SENDERS)
        msg = rng.choice(notes) + template.format(name=name, email=email, date=rng.choice(DATES),
                                                  subject=b["subject"], message=b["message"])
        fw = "Fwd: " if b["lang"] == "en" else "Enc: " if b["lang"] == "pt" else "RV: "
        rows.append(row(b, "fwd", fw + b["subject"], msg, ["forwarded"]))
    for b in draw(plain, 60):
        name, _ = rng.choice(SENDERS)
        msg = (rng.choice(FOLLOW_UP[b["lang"]]) + "\n\n"
               + WROTE[b["lang"]].format(date=rng.choice(DATES), name=name) + "\n"
               + quoted(b["message"]))
        rows.append(row(b, "re", RE[b["lang"]] + b["subject"], msg, ["follow-up"]))
    for n, b in enumerate(draw(all_bases, 40)):
        kind = n % 4
        if kind == 0:
            subject, message = b["subject"].upper(), b["message"].upper()
        elif kind == 1:
            subject, message = b["subject"].lower(), b["message"].lower()
        elif kind == 2:
            subject, message = b["subject"], re.sub(r" ", "  ", b["message"], count=3)
        else:
            subject, message = b["subject"] + " ", b["message"].replace(". ", ".\n\n", 2)
        rows.append(row(b, "dup", subject, message, ["duplicate"]))
    # Two tickets sent as one (same language, same split): the urgent problem decides, else the
    # first. Each is a family of its own, kept only when that family's split is its parts'
    # split, so neither part's text crosses splits.
    by_key = {}
    for b in plain:
        if not {"multi", "injection", "thread"} & set(b["tags"]):
            by_key.setdefault((b["lang"], b["split"]), []).append(b)
    made = set()
    for n in range(200):
        if len(made) == 30:
            break
        lang = ["en", "pt", "en", "pt", "es"][n % 5]
        pool = by_key[(lang, ["dev", "test"][n % 2])]
        a, c = rng.sample(pool, 2)
        family = f"fam-two-{a['family'][4:]}--{c['family'][4:]}"
        if (c["department"] == a["department"] or split_of(family) != a["split"]
                or family in made):
            continue
        made.add(family)
        first = c if (c["is_urgent"] and not a["is_urgent"]) else a
        body, subj = COMBINE[lang]
        r = row(a, "", subj.format(sa=a["subject"], sb=c["subject"]),
                body.format(a=a["message"], b=c["message"]), ["multi"], family=family,
                department=first["department"], is_urgent=a["is_urgent"] or c["is_urgent"])
        r["id"] = f"{family}-{lang}"
        rows.append(r)
    # Near the 20,000-character limit: a pasted log of failing syncs (502s) under a report of an
    # ongoing failure, so urgent like the report itself (evals/README.md, "Ambiguous classes").
    long_bases = [b for b in all_bases
                  if b["department"] == "technical" and b["is_urgent"] and not b["tags"]][:4]
    for n, b in enumerate(long_bases):
        lines = []
        while sum(map(len, lines)) < 18_500 + n * 300:
            k = len(lines)
            lines.append(LOG_LINE.format(ts=f"2026-11-2{n}T0{k % 10}:{k % 60:02d}:{(k * 7) % 60:02d}Z",
                                         w=k % 8, o=400_000 + k * 13, r=k % 5))
        paste = {"en": "\n\nLog from our side below:\n\n", "pt": "\n\nSegue o log do nosso lado:\n\n",
                 "es": "\n\nAdjunto el log de nuestro lado:\n\n"}[b["lang"]]
        rows.append(row(b, "log", b["subject"], b["message"] + paste + "".join(lines), ["long"]))

    families = {}
    for r in rows:
        label = families.setdefault(r["family"], (r["department"], r["is_urgent"], r["split"]))
        assert label == (r["department"], r["is_urgent"], r["split"]), r["id"]
        assert r["split"] == split_of(r["family"]), r["id"]
    ids = Counter(r["id"] for r in rows)
    assert max(ids.values()) == 1, ids.most_common(3)
    assert all(len(r["message"]) <= 20_000 and len(r["subject"]) <= 500 for r in rows)
    out = HERE / "tickets.jsonl"
    with out.open("w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps({k: r[k] for k in ["id", "family", "subject", "message",
                                                  "department", "is_urgent", "split", "tags"]},
                               ensure_ascii=False) + "\n")
    write_counts(rows, out)


def split_table(rows):
    lines = ["| split | families | tickets | urgent |", "|---|---:|---:|---:|"]
    for split in ["dev", "test"]:
        of = [r for r in rows if r["split"] == split]
        urgent = sum(r["is_urgent"] for r in of)
        lines.append(f"| {split} | {len({r['family'] for r in of})} | {len(of)} "
                     f"| {urgent} ({urgent * 100 / len(of):.1f}%) |")
    return "\n".join(lines)


def write_counts(rows, out):
    def table(title, counter):
        lines = [f"| {title} | tickets |", "|---|---:|"]
        lines += [f"| {k} | {v} |" for k, v in sorted(counter.items())]
        return "\n".join(lines)

    lang = Counter(next(t for t in r["tags"] if t.startswith("lang:"))[5:] for r in rows)
    tags = Counter(t for r in rows for t in r["tags"] if not t.startswith("lang:"))
    digest = hashlib.sha256(out.read_bytes()).hexdigest()
    block = "\n\n".join([
        f"{len(rows)} tickets in {len({r['family'] for r in rows})} families; SHA-256 `{digest}`.",
        split_table(rows),
        table("department", Counter(r["department"] for r in rows)),
        table("urgent", Counter(str(r["is_urgent"]).lower() for r in rows)),
        table("language", Counter({k: f"{v} ({v * 100 // len(rows)}%)" for k, v in lang.items()})),
        table("tag", tags),
    ])
    readme = HERE / "README.md"
    text = readme.read_text(encoding="utf-8")
    start, end = "<!-- counts: written by assemble.py -->", "<!-- end of counts -->"
    text = text[: text.index(start) + len(start)] + "\n" + block + "\n" + text[text.index(end):]
    readme.write_text(text, encoding="utf-8")
    print(f"{len(rows)} tickets, sha256 {digest}")


if __name__ == "__main__":
    main()
