//! Next-token log-probabilities: what a request asks for to get them and how each protocol's
//! answer carries them, so a multiple-choice scorer can read which option letter the model
//! found likeliest without parsing generated text. Only the first generated token's top
//! alternatives are kept: that is the distribution over the next token after the prompt.
//!
//! Which servers give them (checked in `docs/tasks.md`): OpenAI Chat Completions and
//! compatible servers (vLLM, llama.cpp's `llama-server`, SGLang) answer `logprobs: true` +
//! `top_logprobs: N` with `choices[0].logprobs.content[i].top_logprobs`; Gemini answers
//! `responseLogprobs: true` + `logprobs: N` with `candidates[0].logprobsResult.topCandidates`;
//! Anthropic's Messages API has no log-probabilities; evalgrid reads none from the Responses
//! API yet. Each protocol says which it asks for ([`super::Protocol::next_token_params`]).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// How many alternatives of the next token a request asks for: OpenAI's maximum, so a letter
/// the model finds unlikely is still among them.
pub const TOP_LOGPROBS: u64 = 20;

/// One alternative for the next token and its natural-log probability, as the server sent it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenLogprob {
    /// The token's text, leading space included.
    pub token: String,
    /// Its log-probability (natural log).
    pub logprob: f64,
    /// Where the token starts in the prompt, in characters (`text_offset`): set only for the
    /// prompt's own tokens echoed back ([`echo_tokens`]), which [`continuation_loglikelihood`]
    /// splits into context and continuation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
}

/// The generation parameters that ask a Chat Completions server for the next token's top
/// alternatives: one token, `logprobs: true`, `top_logprobs: TOP_LOGPROBS`, greedy. They
/// replace the model's own `max_tokens`/`temperature` and are part of the call's key
/// only for calls that ask for them.
#[must_use]
pub fn chat_params() -> Map<String, Value> {
    let mut params = Map::new();
    params.insert("max_tokens".into(), json!(1));
    params.insert("temperature".into(), json!(0.0));
    params.insert("logprobs".into(), json!(true));
    params.insert("top_logprobs".into(), json!(TOP_LOGPROBS));
    params
}

/// The same for Gemini: `responseLogprobs: true` and `logprobs: TOP_LOGPROBS` (inside its
/// `generationConfig`), one token, greedy.
#[must_use]
pub fn gemini_params() -> Map<String, Value> {
    let mut params = Map::new();
    params.insert("max_tokens".into(), json!(1));
    params.insert("temperature".into(), json!(0.0));
    params.insert("responseLogprobs".into(), json!(true));
    params.insert("logprobs".into(), json!(TOP_LOGPROBS));
    params
}

/// The first decoding step's top candidates in a Gemini answer
/// (`candidates[0].logprobsResult.topCandidates[0].candidates[*].{token, logProbability}`).
#[must_use]
pub fn gemini_top_logprobs(json: &Value) -> Vec<TokenLogprob> {
    let Some(top) = json.pointer("/candidates/0/logprobsResult/topCandidates/0/candidates").and_then(Value::as_array) else {
        return Vec::new();
    };
    top.iter()
        .filter_map(|entry| {
            Some(TokenLogprob { token: entry.get("token")?.as_str()?.to_owned(), logprob: entry.get("logProbability")?.as_f64()?, offset: None })
        })
        .collect()
}

/// The first generated token's top alternatives in a Chat Completions answer
/// (`choices[0].logprobs.content[0].top_logprobs[*].{token, logprob}`), best first as sent;
/// empty when the answer has none. A `-inf` (sent as a very negative number, or `null` by
/// some servers) is kept as `f64::NEG_INFINITY`.
#[must_use]
pub fn chat_top_logprobs(json: &Value) -> Vec<TokenLogprob> {
    let Some(top) = json.pointer("/choices/0/logprobs/content/0/top_logprobs").and_then(Value::as_array) else {
        return Vec::new();
    };
    top.iter()
        .filter_map(|entry| {
            let token = entry.get("token")?.as_str()?.to_owned();
            let logprob = entry.get("logprob").map_or(Some(f64::NEG_INFINITY), |v| if v.is_null() { Some(f64::NEG_INFINITY) } else { v.as_f64() })?;
            Some(TokenLogprob { token, logprob, offset: None })
        })
        .collect()
}

/// Each option's log-probability as the next token: the best alternative whose text, without
/// leading and trailing whitespace, is the option's (`" B"` and `"B"` both count for `B`);
/// `None` when no alternative is the option.
#[must_use]
pub fn option_logprobs(top: &[TokenLogprob], options: &[String]) -> Vec<Option<f64>> {
    options
        .iter()
        .map(|option| {
            let want = option.trim();
            top.iter().filter(|t| t.token.trim() == want).map(|t| t.logprob).fold(None, |best: Option<f64>, lp| Some(best.map_or(lp, |b| b.max(lp))))
        })
        .collect()
}

/// The parameters of a prompt-scoring call (`method: loglikelihood`), as lm-eval's `gguf` and
/// `local-completions` models send them: the prompt echoed back with each of its tokens'
/// log-probabilities (`echo: true`, `logprobs: 1`), one generated token, greedy. `echo` also
/// routes the call to the completions endpoint ([`super::route::endpoint`]).
#[must_use]
pub fn loglikelihood_params() -> Map<String, Value> {
    let mut params = Map::new();
    params.insert("max_tokens".into(), json!(1));
    params.insert("temperature".into(), json!(0.0));
    params.insert("logprobs".into(), json!(1));
    params.insert("echo".into(), json!(true));
    params
}

/// The echoed tokens of a completions answer (`choices[0].logprobs.{tokens, token_logprobs,
/// text_offset}`, the shape OpenAI documents and vLLM serves), each with its offset. A token
/// without a log-probability (the prompt's first: nothing precedes it) is left out; so is
/// every token when the answer has no `text_offset` (nothing could be split).
#[must_use]
pub fn echo_tokens(json: &Value) -> Vec<TokenLogprob> {
    let Some(lp) = json.pointer("/choices/0/logprobs") else { return Vec::new() };
    let (Some(tokens), Some(logprobs), Some(offsets)) =
        (lp.get("tokens").and_then(Value::as_array), lp.get("token_logprobs").and_then(Value::as_array), lp.get("text_offset").and_then(Value::as_array))
    else {
        return Vec::new();
    };
    tokens
        .iter()
        .zip(logprobs)
        .zip(offsets)
        .filter_map(|((token, logprob), offset)| {
            Some(TokenLogprob { token: token.as_str().unwrap_or_default().to_owned(), logprob: logprob.as_f64()?, offset: Some(offset.as_u64()?) })
        })
        .collect()
}

/// lm-evaluation-harness's log-likelihood of a continuation (its `gguf` model's
/// `get_result`): the sum of the log-probabilities of the echoed tokens that start at or after
/// the context's end (`context_chars`, Python's `len(context)`) and before the prompt's end
/// (`prompt_chars`: the generated token is not part of it). `None` when no echoed token starts
/// in the continuation (a server that echoed nothing, or a token that straddles the whole
/// continuation).
#[must_use]
pub fn continuation_loglikelihood(tokens: &[TokenLogprob], context_chars: u64, prompt_chars: u64) -> Option<f64> {
    let mut sum = None;
    for token in tokens {
        if let Some(offset) = token.offset
            && offset >= context_chars
            && offset < prompt_chars
        {
            sum = Some(sum.unwrap_or(0.0) + token.logprob);
        }
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape OpenAI documents for `logprobs: true, top_logprobs: 2` (one generated token).
    const RECORDED: &str = r#"{"id":"chatcmpl-1","object":"chat.completion","model":"gpt-4o-mini","choices":[{"index":0,
        "message":{"role":"assistant","content":"B"},
        "logprobs":{"content":[{"token":"B","logprob":-0.31,"bytes":[66],"top_logprobs":[
            {"token":"B","logprob":-0.31,"bytes":[66]},{"token":"A","logprob":-1.4,"bytes":[65]},{"token":" B","logprob":-5.0,"bytes":[32,66]}]}],"refusal":null},
        "finish_reason":"length"}],"usage":{"prompt_tokens":9,"completion_tokens":1,"total_tokens":10}}"#;

    #[test]
    fn reads_the_first_tokens_alternatives_and_picks_each_options_best() {
        let json: Value = serde_json::from_str(RECORDED).unwrap();
        let top = chat_top_logprobs(&json);
        assert_eq!(top.len(), 3);
        assert_eq!(top[1], TokenLogprob { token: "A".into(), logprob: -1.4, offset: None });
        let letters: Vec<String> = ["A", "B", "C"].iter().map(|s| (*s).to_owned()).collect();
        assert_eq!(option_logprobs(&top, &letters), [Some(-1.4), Some(-0.31), None]);
        assert!(chat_top_logprobs(&serde_json::json!({"choices": [{"message": {"content": "x"}}]})).is_empty());
        let null = serde_json::json!({"choices": [{"logprobs": {"content": [{"top_logprobs": [{"token": "A", "logprob": null}]}]}}]});
        assert_eq!(chat_top_logprobs(&null)[0].logprob, f64::NEG_INFINITY);
    }

    /// The shape Google documents for `responseLogprobs: true, logprobs: 2`.
    #[test]
    fn reads_geminis_first_step_candidates() {
        let json: Value = serde_json::from_str(
            r#"{"candidates":[{"content":{"parts":[{"text":"B"}],"role":"model"},"finishReason":"MAX_TOKENS","avgLogprobs":-0.2,
            "logprobsResult":{"topCandidates":[{"candidates":[{"token":"B","tokenId":235305,"logProbability":-0.2},{"token":"A","tokenId":235280,"logProbability":-1.7}]}],
            "chosenCandidates":[{"token":"B","tokenId":235305,"logProbability":-0.2}]}}],"modelVersion":"gemini-2.0-flash"}"#,
        )
        .unwrap();
        let top = gemini_top_logprobs(&json);
        assert_eq!(top, [TokenLogprob { token: "B".into(), logprob: -0.2, offset: None }, TokenLogprob { token: "A".into(), logprob: -1.7, offset: None }]);
    }

    /// The shape OpenAI documents for `/v1/completions` with `echo: true, logprobs: 1` (vLLM
    /// serves the same): the prompt's tokens, the first without a log-probability, then the
    /// one generated token.
    #[test]
    fn sums_the_continuations_echoed_tokens_as_lm_eval_does() {
        let json: Value = serde_json::from_str(
            r#"{"id":"cmpl-1","object":"text_completion","model":"m","choices":[{"index":0,"text":"Capital: Paris.",
            "logprobs":{"tokens":["Capital",":"," Par","is","."],"token_logprobs":[null,-2.5,-1.25,-0.5,-3.0],
            "top_logprobs":[null,{":":-2.5},{" Par":-1.25},{"is":-0.5},{"\n":-0.1}],"text_offset":[0,7,8,12,14]},
            "finish_reason":"length"}],"usage":{"prompt_tokens":4,"completion_tokens":1,"total_tokens":5}}"#,
        )
        .unwrap();
        let tokens = echo_tokens(&json);
        assert_eq!(tokens.len(), 4, "the first token has no log-probability");
        assert_eq!(tokens[0], TokenLogprob { token: ":".into(), logprob: -2.5, offset: Some(7) });
        // Context "Capital:" (8 chars), continuation " Paris" (to 14): " Par" + "is"; "." is generated.
        assert_eq!(continuation_loglikelihood(&tokens, 8, 14), Some(-1.75));
        assert_eq!(continuation_loglikelihood(&tokens, 14, 14), None);
        assert!(echo_tokens(&serde_json::json!({"choices": [{"text": "x"}]})).is_empty());
    }
}
