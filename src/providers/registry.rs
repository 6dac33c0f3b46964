//! [`ProviderKind::protocol`]: the one place a provider kind is matched on, naming the four
//! protocol implementations. Nothing else imports a protocol file to pick one; a new protocol
//! is its own file plus one arm here (`docs/adding-a-protocol.md`).

use super::anthropic::Messages;
use super::completions::Completions;
use super::gemini::GenerateContent;
use super::openai::ChatCompletions;
use super::protocol::Protocol;
use super::responses::Responses;
use super::types::ProviderKind;

impl ProviderKind {
    /// The public API origin, so configs may omit `base_url` for the real services.
    #[must_use]
    pub fn default_base_url(self) -> &'static str {
        self.protocol().default_base_url()
    }

    /// The protocol this kind speaks: the one place a provider kind is matched on.
    #[must_use]
    pub fn protocol(self) -> &'static dyn Protocol {
        match self {
            Self::OpenAi => &ChatCompletions,
            Self::Anthropic => &Messages,
            Self::Gemini => &GenerateContent,
            Self::OpenAiResponses => &Responses,
            Self::OpenAiCompletions => &Completions,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::ProviderKind;

    /// The protocol switchboard lives here only (issues 22 and 31): a `match` arm, a
    /// `matches!` or an `==`/`!=` comparison on a provider kind anywhere else in production
    /// code fails this test; a protocol says what it does through the trait instead. The
    /// mock server has its own single table (`providers/mock/dialects.rs`, exempt); `spec` maps
    /// `provider:` to a kind.
    #[test]
    fn no_match_on_the_provider_kind_outside_registry_rs() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let offenders: Vec<String> = crate::guard::production_lines(&src, &["spec"])
            .into_iter()
            .filter(|line| line.file != "providers/registry.rs" && line.file != "providers/mock/dialects.rs")
            .filter(|line| {
                let text = line.text.as_str();
                let arm = text.split("ProviderKind::").skip(1).any(|rest| {
                    let after = rest.trim_start_matches(|c: char| c.is_ascii_alphanumeric() || c == '_').trim_start();
                    after.starts_with("=>") || after.starts_with('|')
                });
                let compared = ["== ProviderKind::", "!= ProviderKind::"].iter().any(|op| text.contains(op));
                arm || compared || text.starts_with("matches!(") && text.contains("ProviderKind::")
            })
            .map(|line| format!("src/{line}"))
            .collect();
        assert!(offenders.is_empty(), "provider kinds matched outside providers/registry.rs:\n{}", offenders.join("\n"));
    }

    /// The example of `docs/adding-a-protocol.md`, compiled: a dialect is one `impl`.
    mod dialect_example {
        include!("../../docs/examples/protocol_dialect.rs");

        #[test]
        fn the_documented_dialect_compiles_and_keys_by_api_key() {
            let key = Secret::new("sk-x");
            let headers = KeyedGateway.headers(Some(&key)).unwrap();
            assert_eq!(headers.get("api-key").and_then(|v| v.to_str().ok()), Some("sk-x"));
            assert!(headers.get("authorization").is_none());
            assert_eq!(KeyedGateway.url("https://g.example/openai/v1", "m"), ChatCompletions.url("https://g.example/openai/v1", "m"));
            let protocol: &dyn Protocol = &KeyedGateway;
            assert_eq!(protocol.output_cap_fields(), ["/max_completion_tokens", "/max_tokens"]);
        }
    }

    /// Every kind names a protocol whose URL and default origin are its own.
    #[test]
    fn each_kind_has_its_protocol() {
        let kinds = [ProviderKind::OpenAi, ProviderKind::Anthropic, ProviderKind::Gemini, ProviderKind::OpenAiResponses];
        let urls: std::collections::BTreeSet<String> = kinds.iter().map(|k| k.protocol().url("http://h", "m")).collect();
        assert_eq!(urls.len(), 4, "{urls:?}");
        assert_eq!(ProviderKind::Gemini.default_base_url(), "https://generativelanguage.googleapis.com");
    }
}
