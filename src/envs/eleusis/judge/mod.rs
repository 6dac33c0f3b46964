//! The Python judge: LLM-compiled guess code run in a sandboxed CPython worker and checked
//! against the secret rule ([`pyjudge`]; the worker script is `pyjudge/worker.py`).

pub mod pyjudge;
