//! Integration tests: drive the `evalgrid` binary the way a user does.
