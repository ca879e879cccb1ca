//! What the upper parts (the writer, the searcher) reach of the rest: the
//! shared [`Core`] and the lower parts. Naming them here makes those
//! dependencies imports the layering test sees: a lower part that used an
//! upper one would close a cycle.

use super::Core;
use super::catchup::CatchUp;
use super::lifecycle::Lifecycle;

/// The core and the lower parts, as the writer and the searcher reach them.
#[derive(Clone, Copy)]
pub(crate) struct Ctx<'a> {
    pub(crate) core: &'a Core,
    pub(crate) catchup: &'a CatchUp,
    pub(crate) lifecycle: &'a Lifecycle,
}
