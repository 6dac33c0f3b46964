//! Playing a round: the built-in agents (random, oracle, the ideal observer) and an API model's
//! episode, with its action prompt, reply parsing and the rule compiler that turns guesses into code.

pub mod agents;
pub mod compiler;
pub mod ideal;
pub mod llm_episode;
pub mod prompt;
pub mod response;
