//! The answer of one row part of a batch that may be given up: the browser's concern (it
//! must answer `pause` within 200 ms, see `tinygpt_worker::abandon`), kept to this type and
//! the `give_up` argument of [`crate::Trainer::queue_part`] and
//! [`crate::Evaluation::next_part_unless`].

/// What one call that may give its row part up did ([`crate::Trainer::queue_part`],
/// [`crate::Evaluation::next_part_unless`]): three answers a caller treats differently, so
/// not folded into an `Option`.
#[derive(Clone, Debug, PartialEq)]
pub enum RowPart<T> {
    /// The part was the last of its batch: here is what the batch gave.
    Done(T),
    /// The part was taken and counted; rows of the batch are left for the next call.
    MoreRows,
    /// `give_up` answered true: the part was dropped and the next call takes the same rows.
    GivenUp,
}

impl<T> RowPart<T> {
    /// The batch's result, if this part ended it.
    pub fn done(self) -> Option<T> {
        match self {
            RowPart::Done(t) => Some(t),
            RowPart::MoreRows | RowPart::GivenUp => None,
        }
    }
}
