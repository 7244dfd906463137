//! Conformance suites: one set of cases per contract, instantiated per implementation —
//! sources per live engine, destinations and state stores per backend.

mod destination;
mod source;
mod state;
