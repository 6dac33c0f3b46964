//! The table layout (spec §1.5): the mainline of accepted cards and, under each mainline
//! card, the sideline of cards rejected while it was the last mainline card. Rules only see
//! the mainline; the board string is what prompts and result files show.

use serde::{Deserialize, Serialize};

use super::card::Card;

/// Why a card could not be placed on the board.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BoardError {
    /// A rejected card needs a last mainline card to hang under; the mainline is empty
    /// (impossible after setup, which always places a starter).
    #[error("cannot reject {0}: the mainline is empty, so there is no sideline to place it on")]
    EmptyMainline(Card),
}

/// Mainline plus sidelines. `sidelines[i]` holds, in rejection order, the cards rejected
/// while `mainline[i]` was the last mainline card.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Board {
    /// Accepted cards in order, starting with the starter.
    pub mainline: Vec<Card>,
    /// Rejected cards per mainline index (kept the same length as `mainline` by `play`).
    pub sidelines: Vec<Vec<Card>>,
}

impl Board {
    /// A board whose mainline holds only the starter.
    pub fn with_starter(starter: Card) -> Self {
        Board { mainline: vec![starter], sidelines: vec![Vec::new()] }
    }

    /// Places a resolved card: appended to the mainline if accepted, else to the sideline
    /// of the current last mainline card.
    pub fn play(&mut self, card: Card, accepted: bool) -> Result<(), BoardError> {
        if accepted {
            self.mainline.push(card);
            self.pad_sidelines();
            return Ok(());
        }
        let Some(last) = self.mainline.len().checked_sub(1) else {
            return Err(BoardError::EmptyMainline(card));
        };
        self.pad_sidelines();
        self.sidelines[last].push(card);
        Ok(())
    }

    /// Grows `sidelines` to at least the mainline length (never drops hand-built data).
    fn pad_sidelines(&mut self) {
        if self.sidelines.len() < self.mainline.len() {
            self.sidelines.resize_with(self.mainline.len(), Vec::new);
        }
    }

    /// The board string of §1.5: each mainline card followed by its sideline cards as
    /// `[card]`, all joined by single spaces; `(empty)` for an empty mainline.
    pub fn board_string(&self) -> String {
        if self.mainline.is_empty() {
            return "(empty)".to_owned();
        }
        let mut out = String::new();
        for (i, card) in self.mainline.iter().enumerate() {
            if i > 0 {
                out.push(' ');
            }
            out.push_str(&card.to_string());
            for rejected in self.sidelines.get(i).map(Vec::as_slice).unwrap_or_default() {
                out.push_str(" [");
                out.push_str(&rejected.to_string());
                out.push(']');
            }
        }
        out
    }
}

#[cfg(test)]
mod tests;
