//! The backend conformance kit: op tests written once, run by every kernel crate against
//! itself with explicit tolerances. (Filled in with the CPU reference backend.)
