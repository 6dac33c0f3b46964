use std::error::Error as _;

use super::*;

fn not_found() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::NotFound, "no such file")
}

/// A typed cause reads exactly as the message-only variant did (failure records in the
/// cache keep this text), and stays reachable, with its type, as the source.
#[test]
fn a_kept_cause_reads_as_the_message_it_replaced_and_is_the_source() {
    let cases = [
        (StepError::episode(not_found()), StepError::episode_msg(not_found().to_string())),
        (
            StepError::episode_in("cannot read replies file `r.json`", not_found()),
            StepError::episode_msg(format!("cannot read replies file `r.json`: {}", not_found())),
        ),
        (StepError::score(not_found()), StepError::score_msg(not_found().to_string())),
        (StepError::score_in("not a BBEH episode record", not_found()), StepError::score_msg(format!("not a BBEH episode record: {}", not_found()))),
        (StepError::worker(not_found()), StepError::worker_msg(not_found().to_string())),
    ];
    for (caused, message_only) in cases {
        assert_eq!(caused.to_string(), message_only.to_string());
        assert!(message_only.source().is_none());
        let source = caused.source().expect("the cause is the source");
        assert_eq!(source.downcast_ref::<std::io::Error>().map(std::io::Error::kind), Some(std::io::ErrorKind::NotFound), "{caused}");
    }
}
