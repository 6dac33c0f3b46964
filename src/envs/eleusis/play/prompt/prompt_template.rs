//! Versioned text of the per-turn action prompt (spec §4.1), kept apart from the renderer so
//! that its exact bytes can be hashed into step keys. `{{name}}` marks a placeholder.
//!
//! This is an evalgrid reconstruction that follows the reference's section structure, order
//! and fixed lines as §4.1 describes them (`Turn: t / 30`, the history and failed-guess
//! formats, `<ACTION>` JSON, the retry suffix); its prose is evalgrid's own wording, so the
//! rendered prompts are *not* byte-identical to the reference `prompts/action.py` +
//! `prompts/game_rules.py` (MIT, Copyright (c) 2026 Hugging Face). A byte-exact `v1` needs
//! those texts vendored verbatim with their notice.

/// Rules of the game, parameterised by `{{hand_size}}`, `{{penalty}}` and `{{max_turns}}`.
/// Suit symbols carry U+FE0F variation selectors, as in the reference (§4.1, §9 #16).
pub const GAME_RULES_TEMPLATE: &str = "\
### Cards

The game uses two standard 52-card decks shuffled together (104 cards), so every card exists twice.
- Ranks are numbers: Ace = 1, 2 to 10 = their value, Jack = 11, Queen = 12, King = 13.
- Number cards have ranks 1 to 10; face cards (J, Q, K) have ranks 11 to 13.
- Suits and colours: hearts ♥\u{fe0f} and diamonds ♦\u{fe0f} are red; clubs ♣\u{fe0f} and spades ♠\u{fe0f} are black.

### Mainline and sidelines

- Accepted cards form the mainline, a single row read from left to right.
- A rejected card goes to a sideline, attached below the last mainline card at the time it was played.
- Only the mainline matters for the rule: \"the previous card\" always means the last card of the mainline.

### The secret rule

The secret rule is deterministic and can be stated in one sentence. Whether a card is accepted depends only on the card itself and on the cards already on the mainline: suits, colours, ranks, parity, positions, and relations to earlier mainline cards. It never depends on sideline cards or on cards that have not been played.

Examples of possible rules:
- \"Only cards whose rank is odd.\"
- \"A card must have the same suit as the previous card or a higher rank.\"
- \"Clubs are never accepted.\"
- \"The mainline must go up in rank by exactly one each time, wrapping from King to Ace.\"

### Start of the game

- You are dealt {{hand_size}} cards. After each play you draw one new card, so you always hold {{hand_size}} cards.
- A starter card that satisfies the secret rule is placed on the mainline before your first turn.

### Turns

On each turn you play exactly one card from your hand.
- If the secret rule accepts it, it is appended to the mainline.
- If the secret rule rejects it, it is placed on the sideline of the last mainline card.

### Guessing the rule

On any turn you may make a formal guess of the secret rule. A guess is judged by logical equivalence with the secret rule, not by its wording.
- A correct guess ends the game immediately.
- A wrong guess costs {{penalty}} points, and the game continues.

### End of the game and score

The game ends when you guess the rule correctly or after {{max_turns}} turns.
Score = ({{max_turns}} - current_turn) - ({{penalty}} × number_of_failed_guesses)
The score can be negative. The faster you find the rule, and the fewer wrong guesses you make, the higher your score.

---
";

/// The action prompt. Placeholders: `{{game_rules}}`, `{{turn}}`, `{{max_turns}}`,
/// `{{failed_guess_count}}`, `{{penalty_so_far}}`, `{{potential_score}}`, `{{board}}`,
/// `{{hand}}`, `{{history}}`, `{{failed_guesses}}`, `{{penalty}}`.
pub const ACTION_TEMPLATE: &str = "\
# SECRET RULE CARD GAME

You are playing a single-player card game whose goal is to discover a secret rule that decides which cards are accepted and which are rejected.
On this turn you must select one card from your hand to play, and you may also formally guess the secret rule.
Your score depends on how many turns you need to find the rule.

## RULES OF THE GAME

{{game_rules}}
## YOUR TASK

Select a card from your hand to play this turn, and optionally make a formal guess of the secret rule.

### CURRENT GAME STATE

Turn: {{turn}} / {{max_turns}}
Penalty so far ({{failed_guess_count}} wrong guesses): {{penalty_so_far}}
Current potential score if you guess correctly this turn: {{potential_score}}

#### MAINLINE & SIDELINES
Rejected cards are shown in brackets right after the mainline card they were played after.

{{board}}

#### YOUR HAND

{{hand}}

#### RECENT PLAY HISTORY (your last 3 plays)
{{history}}
#### ALL YOUR PREVIOUS FAILED FORMAL GUESSES
{{failed_guesses}}
#### YOUR ACTION

You may reason step by step first. Then end your reply with your decision inside <ACTION> tags, providing:
- reasoning_summary: one sentence explaining your analysis and why you play this card.
- card: the card you play, written exactly as in your hand (for example \"5♥\").
- tentative_rule: your current best hypothesis for the secret rule, stated clearly and unequivocally.
- confidence_level: an integer from 0 to 10 giving the probability that your tentative rule is correct (7 = \"70% probability to be correct\").
- guess_rule: true to make a formal guess of your tentative rule this turn, false otherwise.

<ACTION>
{
    \"reasoning_summary\": \"...\",
    \"card\": \"...\",
    \"tentative_rule\": \"...\",
    \"confidence_level\": 0,
    \"guess_rule\": false
}
</ACTION>

About guess_rule: if your formal guess is correct, the game ends and you win; if it is wrong, you lose {{penalty}} points and the game continues. With guess_rule false your tentative rule has no consequence.

Example:
<ACTION>
{
    \"reasoning_summary\": \"Red and black cards seem to alternate, the last mainline card is black, so I play a red card.\",
    \"card\": \"3♥\",
    \"tentative_rule\": \"Cards must alternate between red and black colors\",
    \"confidence_level\": 6,
    \"guess_rule\": false
}
</ACTION>
";

/// Appended to the prompt on attempts 2 and 3 of a turn (after a blank line).
pub const RETRY_SUFFIX: &str = "\nYour previous reply could not be used. Do not reason for too long: keep your analysis short and make sure your reply ends with a valid <ACTION> block.\n";

/// One history line: `{{card}}`, `{{verdict}}` (`✓ ACCEPTED` / `✗ REJECTED`).
pub const HISTORY_LINE: &str = "- {{card}}: {{verdict}}\n";

/// The indented reasoning line under a history entry with a non-empty summary.
pub const HISTORY_REASONING_LINE: &str = "  Your reasoning: {{reasoning}}\n";

/// One failed formal guess, in double quotes.
pub const FAILED_GUESS_LINE: &str = "- \"{{guess}}\"\n";

/// Closing line after the list of failed formal guesses.
pub const FAILED_GUESSES_FOOTER: &str = "\nAll of the guesses above were judged incorrect. Do not repeat them.\n";
