//! Visibility filters that become part of every index query.
//!
//! A [`Filter`] is an OR of [`Scope`]s; a scope is an AND of "value is one of"
//! sets over the raw fields (scene, privacy, stage, kind, subject, origin). An
//! empty set means "any". The text index turns a filter into tantivy clauses
//! and the metadata store into a SQL `WHERE`, so rows a caller may not see are
//! never loaded: nothing is filtered after the fact.
//!
//! A scope may also carry an instant ([`Scope::unexpired_at`]): only memories
//! without an expiry, or expiring after it, match. Both indexes apply it as a
//! range condition inside the same query.

use chrono::{DateTime, Utc};

use crate::model::{Origin, Privacy, Scene, Stage, Subject};

/// One conjunction of allowed values. Empty vectors allow everything.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Scope {
    /// Allowed scenes.
    pub scenes: Vec<Scene>,
    /// Allowed sensitivities.
    pub privacy: Vec<Privacy>,
    /// Allowed stages.
    pub stages: Vec<Stage>,
    /// Allowed kinds.
    pub kinds: Vec<String>,
    /// Allowed subjects.
    pub subjects: Vec<Subject>,
    /// Allowed origins.
    pub origins: Vec<Origin>,
    /// If set, only memories with no expiry or an expiry after this instant.
    pub unexpired_at: Option<DateTime<Utc>>,
}

/// What a query may see: any of the scopes.
#[derive(Debug, Clone, PartialEq)]
pub struct Filter {
    /// Alternatives; a memory is visible if it matches at least one.
    pub any_of: Vec<Scope>,
}

impl Filter {
    /// Everything (the local operator's view).
    pub fn all() -> Self {
        Filter {
            any_of: vec![Scope::default()],
        }
    }

    /// A single scope.
    pub fn scope(scope: Scope) -> Self {
        Filter {
            any_of: vec![scope],
        }
    }

    /// Whether nothing at all is visible.
    pub(crate) fn is_empty(&self) -> bool {
        self.any_of.is_empty()
    }

    /// Whether `m` matches the filter: the same test the SQL `WHERE` of
    /// [`crate::index::meta`] makes, for the one memory read from outside
    /// the index (a journal line not applied yet, see
    /// `hub::parts::backlog`).
    pub(crate) fn admits(&self, m: &crate::model::Memory) -> bool {
        fn one_of<T: PartialEq>(allowed: &[T], v: &T) -> bool {
            allowed.is_empty() || allowed.contains(v)
        }
        self.any_of.iter().any(|s| {
            one_of(&s.scenes, &m.scene)
                && one_of(&s.privacy, &m.privacy)
                && one_of(&s.stages, &m.stage)
                && one_of(&s.kinds, &m.kind)
                && one_of(&s.subjects, &m.subject)
                && one_of(&s.origins, &m.origin)
                && s.unexpired_at.is_none_or(|at| {
                    m.expires_at
                        .is_none_or(|e| e.timestamp_millis() > at.timestamp_millis())
                })
        })
    }

    /// Whether a scope restricts nothing at all.
    pub(crate) fn is_unrestricted(scope: &Scope) -> bool {
        scope.unexpired_at.is_none() && Self::field_sets(scope).is_empty()
    }

    /// The raw `(field, allowed values)` sets of one scope; empty sets are omitted.
    pub(crate) fn field_sets(scope: &Scope) -> Vec<(&'static str, Vec<String>)> {
        fn strs<T: ToString>(v: &[T]) -> Vec<String> {
            v.iter().map(ToString::to_string).collect()
        }
        [
            ("scene", strs(&scope.scenes)),
            ("privacy", strs(&scope.privacy)),
            ("stage", strs(&scope.stages)),
            ("kind", scope.kinds.clone()),
            ("subject", strs(&scope.subjects)),
            ("origin", strs(&scope.origins)),
        ]
        .into_iter()
        .filter(|(_, v)| !v.is_empty())
        .collect()
    }
}
