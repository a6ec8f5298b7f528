//! What the node's pods reference from the cluster: ConfigMaps and Secrets,
//! each watched by name with its own crash-safe cache ([`configs`]), the
//! Services of the pods' namespaces for their environment ([`services`]),
//! and projected service-account tokens ([`tokens`] pure, [`token_sync`]
//! the TokenRequest task and the 0600 cache).
//!
//! Must not know: the agent; the agent looks objects up through
//! `crate::pod::config_objects::ConfigObjects`.

pub mod configs;
pub mod services;
pub mod token_sync;
pub mod tokens;
