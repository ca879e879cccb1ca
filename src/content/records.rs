//! The one credential check every record meets, on every path in: a write,
//! an ingest, an import, a journal line replayed from disk (a peer device's
//! file, a restored backup), a Markdown document, a forget's reason, a
//! membership change. Every field is checked, not only the text: a token
//! typed into `speaker`, `session`, `time` or an idempotency key is stored
//! (and often returned) just the same.
//!
//! Fields are checked as prose (text, title, tags, speaker, time, a reason,
//! a member's name: every test of [`super::detect_credential`]) or as
//! identifiers (ids, keys, sessions, sources: every test but the entropy
//! one, since a random id is what they hold).
//!
//! A `secret` memory may hold a credential in its text, title and tags on
//! purpose (writing one needs the `secret:write` scope, and it is pinned to
//! the owner's audiences); its other fields, like every field of any other
//! memory, may not.

use super::credentials::{detect_credential, detect_credential_in_id};
use crate::error::Error;
use crate::model::{Fact, Privacy, Record};

/// A credential found in one field: the field and what it looks like,
/// never the value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CredentialHit {
    /// The field, by its name in the API and the journal (`text`, `speaker`, ...).
    pub field: &'static str,
    /// What it looks like (`a GitHub token`, `a password`, ...).
    pub what: &'static str,
}

/// How a field is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FieldKind {
    /// Free text: every test.
    Prose,
    /// An identifier: every test but the entropy one.
    Id,
}

/// What joins fields checked together (see [`scan`]).
const SEPARATOR: &str = "\n\u{1}\n";

/// The first credential among `fields`, checked in order.
///
/// Fields of one kind are first checked together (a record without a
/// credential, nearly every one, costs two passes instead of one per
/// field); only when that finds something is each of them checked on its
/// own, and that answer counts. The fields are joined by [`SEPARATOR`]: no
/// test reads across a line break, and none matches a line holding only
/// `\u{1}`, so together they find whatever one of them would.
pub(crate) fn scan<'a>(
    fields: impl IntoIterator<Item = (&'static str, FieldKind, &'a str)>,
) -> Option<CredentialHit> {
    let fields: Vec<(&'static str, FieldKind, &str)> = fields.into_iter().collect();
    let check = |kind: FieldKind, value: &str| match kind {
        FieldKind::Prose => detect_credential(value),
        FieldKind::Id => detect_credential_in_id(value),
    };
    let suspect = |kind: FieldKind| {
        let values: Vec<&str> = fields
            .iter()
            .filter(|(_, k, _)| *k == kind)
            .map(|(_, _, v)| *v)
            .collect();
        values.len() == 1 || (values.len() > 1 && check(kind, &values.join(SEPARATOR)).is_some())
    };
    let suspects = [FieldKind::Prose, FieldKind::Id].map(|k| (k, suspect(k)));
    fields.iter().find_map(|&(field, kind, value)| {
        if !suspects.contains(&(kind, true)) {
            return None;
        }
        Some(CredentialHit {
            field,
            what: check(kind, value)?,
        })
    })
}

/// A memory's content fields (text, title, tags: each tag, and all of them
/// together, since a secret can be cut across tags), unless `privacy` is
/// `secret`, which may hold a credential there on purpose.
pub(crate) fn content_fields<'a>(
    privacy: Privacy,
    text: &'a str,
    title: Option<&'a str>,
    tags: &'a [String],
    joined_tags: &'a str,
) -> Vec<(&'static str, FieldKind, &'a str)> {
    if privacy == Privacy::Secret {
        return Vec::new();
    }
    let mut out = vec![("text", FieldKind::Prose, text)];
    out.extend(title.map(|t| ("title", FieldKind::Prose, t)));
    out.extend(tags.iter().map(|t| ("tags", FieldKind::Prose, t.as_str())));
    if tags.len() > 1 {
        out.push(("tags", FieldKind::Prose, joined_tags));
    }
    out
}

/// A fact's other fields: where and when it happened, and its bookkeeping.
fn fact_fields(fact: &Fact) -> Vec<(&'static str, FieldKind, &str)> {
    let mut out = vec![
        ("id", FieldKind::Id, fact.id.as_str()),
        ("scene", FieldKind::Id, fact.scene.as_str()),
        ("kind", FieldKind::Id, fact.kind.as_str()),
        ("source", FieldKind::Id, fact.source.as_str()),
        ("device", FieldKind::Id, fact.device.as_str()),
    ];
    let optional = [
        ("time", FieldKind::Prose, fact.setting.time.as_deref()),
        ("speaker", FieldKind::Prose, fact.setting.speaker.as_deref()),
        ("session", FieldKind::Id, fact.setting.session.as_deref()),
        ("supersedes", FieldKind::Id, fact.supersedes.as_deref()),
        (
            "source_message_id",
            FieldKind::Id,
            fact.source_message_id.as_deref(),
        ),
        (
            "idempotency_key",
            FieldKind::Id,
            fact.idempotency_key.as_deref(),
        ),
        ("run", FieldKind::Id, fact.run.as_deref()),
    ];
    out.extend(
        optional
            .into_iter()
            .filter_map(|(f, k, v)| v.map(|v| (f, k, v))),
    );
    out
}

/// A credential in any field of `fact` (see the module docs for `secret`).
pub(crate) fn in_fact(fact: &Fact) -> Option<CredentialHit> {
    let joined = fact.tags.join(" ");
    scan(
        content_fields(
            fact.privacy,
            &fact.text,
            fact.title.as_deref(),
            &fact.tags,
            &joined,
        )
        .into_iter()
        .chain(fact_fields(fact)),
    )
}

/// A credential in any field of `record`: a put's fact, a forget's id,
/// reason and source, a touch's ids.
pub fn in_record(record: &Record) -> Option<CredentialHit> {
    match record {
        Record::Put { fact, .. } => in_fact(fact),
        Record::Forget {
            id, reason, source, ..
        } => scan(
            [
                ("id", FieldKind::Id, id.as_str()),
                ("source", FieldKind::Id, source.as_str()),
            ]
            .into_iter()
            .chain(reason.as_deref().map(|r| ("reason", FieldKind::Prose, r))),
        ),
        Record::Touch { ids, .. } => scan(ids.iter().map(|id| ("ids", FieldKind::Id, id.as_str()))),
        Record::Link { link, .. } | Record::Unlink { link, .. } => scan(
            [
                ("a", FieldKind::Id, link.a.as_str()),
                ("b", FieldKind::Id, link.b.as_str()),
                ("rel", FieldKind::Id, link.rel.as_str()),
                ("source", FieldKind::Id, link.source.as_str()),
            ]
            .into_iter()
            .chain(link.reason.as_deref().map(|r| ("reason", FieldKind::Id, r))),
        ),
    }
}

/// What replay does with a journal line, by the credential check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replay {
    /// No credential: applied as usual.
    Apply,
    /// A forget whose reason (or source) holds a credential: applied, since
    /// forgetting only hides (and the index keeps no reason), and reported.
    ApplyReported(CredentialHit),
    /// Quarantined: recorded with why, never applied, never indexed.
    Quarantine(CredentialHit),
}

/// How replay treats `record` (see [`Replay`]).
pub fn replay_verdict(record: &Record) -> Replay {
    match (in_record(record), record) {
        (None, _) => Replay::Apply,
        (Some(hit), Record::Forget { .. }) if hit.field != "id" => Replay::ApplyReported(hit),
        (Some(hit), _) => Replay::Quarantine(hit),
    }
}

impl CredentialHit {
    /// The id to record with a quarantined line: `id` itself unless it is
    /// where the credential is (then a placeholder: a report never shows it).
    pub(crate) fn shown_id(self, id: &str) -> String {
        if matches!(self.field, "id" | "ids" | "a" | "b") {
            "(id withheld: it holds the credential)".into()
        } else {
            id.to_string()
        }
    }

    /// The refusal of a write, an ingest or an import (`INVALID_INPUT`):
    /// names the field and the kind, never the value, and says how to keep
    /// a credential on purpose where that is possible.
    pub(crate) fn refusal(self) -> Error {
        let content = matches!(self.field, "text" | "title" | "tags");
        let how = if content {
            "credentials are refused unless written with privacy \"secret\" (needs the \
             \"secret:write\" scope)"
        } else {
            "credentials are refused in every field but the text, title and tags of a secret memory"
        };
        Error::invalid(format!(
            "the {} appears to contain {}; memories are kept in an append-only journal, so {how}. \
             Remove the secret and try again",
            self.field, self.what
        ))
    }

    /// Why a journal line or a document was quarantined (never the value).
    pub(crate) fn reason(self) -> String {
        format!(
            "its {} appears to contain {}; credentials are never indexed",
            self.field, self.what
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Scene, Setting, Stage, Subject};

    fn fact(text: &str, privacy: Privacy) -> Fact {
        Fact {
            id: "fact-main-mqz8k2p1-a1b2".into(),
            ts: chrono::DateTime::from_timestamp(1_780_000_000, 0).unwrap(),
            scene: Scene::parse("main").unwrap(),
            kind: "note".into(),
            stage: Stage::Long,
            text: text.into(),
            title: None,
            tags: vec![],
            privacy,
            subject: Subject::Owner,
            source: "cli".into(),
            importance: 0.5,
            tier: None,
            supersedes: None,
            expires_at: None,
            source_message_id: None,
            idempotency_key: None,
            device: "laptop".into(),
            accesses: 0,
            run: None,
            setting: Setting::default(),
        }
    }

    const TOKEN: &str = "ghp_Zx9vQ2mL8kP4rT6wY1nB3cD5fG7hJ0kLm2Np";

    #[test]
    fn every_field_is_checked_and_secret_exempts_only_the_content() {
        let check = |f: &Fact| in_fact(f).map(|h| h.field);
        assert_eq!(check(&fact("likes green tea", Privacy::Normal)), None);
        assert_eq!(check(&fact(TOKEN, Privacy::Normal)), Some("text"));
        assert_eq!(check(&fact(TOKEN, Privacy::Secret)), None);
        let mut f = fact("likes green tea", Privacy::Secret);
        f.setting.speaker = Some(TOKEN.into());
        assert_eq!(check(&f), Some("speaker"));
        let mut f = fact("likes green tea", Privacy::Normal);
        f.setting.session = Some(TOKEN.into());
        assert_eq!(check(&f), Some("session"));
        let mut f = fact("likes green tea", Privacy::Normal);
        f.setting.time = Some(TOKEN.into());
        assert_eq!(check(&f), Some("time"));
        let mut f = fact("likes green tea", Privacy::Normal);
        f.idempotency_key = Some(format!("w|cli|main|{TOKEN}"));
        assert_eq!(check(&f), Some("idempotency_key"));
        let mut f = fact("likes green tea", Privacy::Normal);
        f.source_message_id = Some(format!("{TOKEN}#0123456789ab"));
        assert_eq!(check(&f), Some("source_message_id"));
        let mut f = fact("likes green tea", Privacy::Normal);
        f.tags = vec!["password".into(), "hunter22".into()];
        assert_eq!(
            check(&f),
            Some("tags"),
            "each tag is harmless, together they are not"
        );
        // Random ids are what identifier fields hold: no entropy test there.
        let mut f = fact("likes green tea", Privacy::Normal);
        f.idempotency_key = Some("w|cli|main|aB3dE5gH7jK9mN1pQ3sTuV5x".into());
        f.setting.session = Some("sess_8f3kD92nLx0Qa7ZmWq4R".into());
        assert_eq!(check(&f), None);
    }

    /// Checking fields together finds exactly what checking them one by
    /// one does: every window of three probe lines, as prose and as ids.
    #[test]
    fn fields_checked_together_answer_as_one_by_one() {
        let probes = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/credential-probes.jsonl"),
        )
        .unwrap();
        let texts: Vec<String> = probes
            .lines()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["text"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect();
        let names = ["a", "b", "c"];
        for window in texts.windows(3) {
            for kinds in [
                [FieldKind::Prose; 3],
                [FieldKind::Id; 3],
                [FieldKind::Id, FieldKind::Prose, FieldKind::Id],
            ] {
                let fields: Vec<(&'static str, FieldKind, &str)> = (0..3)
                    .map(|i| (names[i], kinds[i], window[i].as_str()))
                    .collect();
                let one_by_one = fields.iter().find_map(|&(field, kind, value)| {
                    let what = match kind {
                        FieldKind::Prose => detect_credential(value),
                        FieldKind::Id => detect_credential_in_id(value),
                    }?;
                    Some(CredentialHit { field, what })
                });
                assert_eq!(scan(fields.clone()), one_by_one, "{window:?}");
            }
        }
    }

    #[test]
    fn forgets_and_touches_are_checked_and_refusals_never_echo_the_value() {
        let forget = Record::Forget {
            v: 1,
            id: "fact-main-mqz8k2p1-a1b2".into(),
            ts: chrono::DateTime::from_timestamp(1_780_000_000, 0).unwrap(),
            reason: Some(format!("leaked {TOKEN}")),
            source: "cli".into(),
        };
        let hit = in_record(&forget).unwrap();
        assert_eq!(hit.field, "reason");
        for message in [hit.refusal().to_string(), hit.reason()] {
            assert!(
                !message.contains("ghp_") && message.contains("reason"),
                "{message}"
            );
        }
        let touch = Record::Touch {
            v: 1,
            ids: vec!["fact-main-1".into(), format!("mh_{}", "ab".repeat(32))],
            ts: chrono::DateTime::from_timestamp(1_780_000_000, 0).unwrap(),
        };
        assert_eq!(in_record(&touch).map(|h| h.what), Some("a memd token"));
        let msg = CredentialHit {
            field: "text",
            what: "a password",
        }
        .refusal()
        .to_string();
        assert!(msg.contains("secret:write"), "{msg}");
    }
}
