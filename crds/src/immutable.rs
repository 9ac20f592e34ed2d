//! The CEL rules that keep a field as it was created, so each resource
//! spells "immutable" the same way.
//!
//! Kubernetes evaluates a rule that names `oldSelf` only when the old and the
//! new value both exist, so a rule on an optional field itself cannot stop
//! the field from being added or removed: that rule sits on the object
//! holding the field instead.

use kube::core::Rule;

/// For a field that is always set: it never changes (`<path> is immutable`).
pub(crate) fn immutable(path: &str) -> Rule {
    Rule::new("self == oldSelf").message(format!("{path} is immutable").as_str())
}

/// For the object holding the optional field at `path` (a dotted path as the
/// user sees it, whose last part is the field): the field is never added,
/// removed or changed.
pub(crate) fn immutable_optional(path: &str) -> Rule {
    let field = path.rsplit('.').next().unwrap_or(path);
    Rule::new(format!(
        "has(self.{field}) == has(oldSelf.{field}) && (!has(self.{field}) || self.{field} == oldSelf.{field})"
    ))
    .message(format!("{path} is immutable").as_str())
}
