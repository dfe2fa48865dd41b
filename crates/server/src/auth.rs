//! SCRAM-SHA-256 (RFC 5802/7677) as PostgreSQL's server side speaks it:
//! verifiers in `pg_authid` form, no channel binding (SCRAM-SHA-256-PLUS is
//! not offered), and a mock exchange for unknown users so a client cannot
//! tell "no such user" from "wrong password".

use std::collections::HashMap;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use ring::rand::{SecureRandom, SystemRandom};
use ring::{digest, hmac};

use crate::ServerError;

pub const MECHANISM: &str = "SCRAM-SHA-256";
/// Nonce bytes the server adds (PostgreSQL uses 18).
const SERVER_NONCE_BYTES: usize = 18;
/// Iterations of the mock verifier (PostgreSQL's default).
const MOCK_ITERATIONS: u32 = 4096;

/// What the server keeps of a password.
#[derive(Clone)]
pub struct Verifier {
    iterations: u32,
    salt: Vec<u8>,
    stored_key: Vec<u8>,
    server_key: Vec<u8>,
}

impl Verifier {
    /// `SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>`.
    pub fn parse(text: &str) -> Option<Verifier> {
        let rest = text.strip_prefix("SCRAM-SHA-256$")?;
        let (params, keys) = rest.split_once('$')?;
        let (iterations, salt) = params.split_once(':')?;
        let (stored, server) = keys.split_once(':')?;
        let v = Verifier {
            iterations: iterations.parse().ok().filter(|&n: &u32| n > 0)?,
            salt: B64.decode(salt).ok()?,
            stored_key: B64.decode(stored).ok()?,
            server_key: B64.decode(server).ok()?,
        };
        (v.stored_key.len() == 32 && v.server_key.len() == 32).then_some(v)
    }

    /// A verifier for a plaintext password (SASLprep, random salt, 4096
    /// iterations), exactly as PostgreSQL computes `rolpassword`.
    pub fn from_password(password: &str) -> Option<Verifier> {
        Verifier::parse(&postgres_protocol::password::scram_sha_256(password.as_bytes()))
    }
}

/// Who may connect and how: the users, the host rules and the failure
/// delay. A reload builds a new one and swaps it in whole; a connection
/// uses the one it found at its start.
pub struct AuthState {
    pub users: Users,
    pub rules: crate::hba::Rules,
    pub failure_delay: std::time::Duration,
    connection_limits: HashMap<String, usize>,
}

impl AuthState {
    /// From a validated configuration's `[auth]`; `previous`: the state a
    /// reload replaces (unknown users keep their mock salts).
    pub fn new(
        config: &crate::ServerConfig,
        listen: std::net::SocketAddr,
        previous: Option<&AuthState>,
    ) -> Result<AuthState, ServerError> {
        let rules = config.validate_auth(listen)?;
        let users = Users::new(&config.auth.users, previous.map(|p| &p.users.mock_key))?;
        let connection_limits =
            config.auth.users.iter().filter_map(|u| Some((u.name.clone(), u.connection_limit?))).collect();
        Ok(AuthState { users, rules, failure_delay: config.auth.failure_delay(), connection_limits })
    }

    /// The user's `connection_limit`, if it has one.
    pub fn connection_limit(&self, user: &str) -> Option<usize> {
        self.connection_limits.get(user).copied()
    }
}

/// The configured users, by name.
pub struct Users {
    verifiers: HashMap<String, Verifier>,
    /// Derives stable mock salts for unknown user names.
    mock_key: hmac::Key,
}

impl Users {
    pub fn new(users: &[crate::config::UserConfig], mock_key: Option<&hmac::Key>) -> Result<Users, ServerError> {
        let mut verifiers = HashMap::new();
        for u in users {
            let v = if u.password.starts_with("SCRAM-SHA-256$") {
                Verifier::parse(&u.password).ok_or_else(|| {
                    ServerError::Config(format!("user \"{}\": malformed SCRAM-SHA-256 verifier", u.name))
                })?
            } else {
                Verifier::from_password(&u.password).ok_or_else(|| {
                    ServerError::Config(format!("user \"{}\": cannot compute a SCRAM verifier", u.name))
                })?
            };
            verifiers.insert(u.name.clone(), v);
        }
        let mock_key = match mock_key {
            Some(key) => key.clone(),
            None => {
                let mut secret = [0u8; 32];
                SystemRandom::new()
                    .fill(&mut secret)
                    .map_err(|_| ServerError::Config("no system randomness".to_owned()))?;
                hmac::Key::new(hmac::HMAC_SHA256, &secret)
            }
        };
        Ok(Users { verifiers, mock_key })
    }

    /// An `[[auth.users]]` entry names `user`.
    pub fn knows(&self, user: &str) -> bool {
        self.verifiers.contains_key(user)
    }

    /// No `[[auth.users]]` at all.
    pub fn is_empty(&self) -> bool {
        self.verifiers.is_empty()
    }

    /// The user's verifier, or a mock one that no proof matches.
    fn verifier(&self, user: &str) -> (Verifier, bool) {
        match self.verifiers.get(user) {
            Some(v) => (v.clone(), true),
            None => {
                let salt = hmac::sign(&self.mock_key, user.as_bytes()).as_ref()[..16].to_vec();
                (
                    Verifier { iterations: MOCK_ITERATIONS, salt, stored_key: vec![0; 32], server_key: vec![0; 32] },
                    false,
                )
            }
        }
    }
}

/// Why an exchange failed: the client sent nonsense (08P01) or the proof
/// did not match (28P01).
#[derive(Debug)]
pub enum ScramError {
    Malformed(&'static str),
    Failed,
}

/// The server side between its first and final message.
pub struct Exchange {
    verifier: Verifier,
    known_user: bool,
    gs2_header: String,
    client_first_bare: String,
    server_first: String,
    nonce: String,
}

impl Exchange {
    /// Handles client-first-message; returns the state and server-first-message.
    /// `role`: the verifier of a role made with CREATE ROLE ... PASSWORD,
    /// used when no `[[auth.users]]` entry names `user` (the file wins).
    pub fn start(
        users: &Users,
        user: &str,
        role: Option<&Verifier>,
        client_first: &[u8],
    ) -> Result<(Exchange, String), ScramError> {
        let text = std::str::from_utf8(client_first).map_err(|_| ScramError::Malformed("message is not UTF-8"))?;
        let (gs2_flag, rest) = text.split_once(',').ok_or(ScramError::Malformed("missing GS2 header"))?;
        match gs2_flag {
            // "y": the client could bind but thinks we cannot; we cannot.
            "n" | "y" => {}
            _ if gs2_flag.starts_with("p=") => return Err(ScramError::Malformed("channel binding is not supported")),
            _ => return Err(ScramError::Malformed("invalid GS2 header")),
        }
        let (authzid, bare) = rest.split_once(',').ok_or(ScramError::Malformed("missing GS2 header"))?;
        if !authzid.is_empty() {
            return Err(ScramError::Malformed("authorization identity is not supported"));
        }
        let client_nonce = bare
            .split(',')
            .find_map(|attr| attr.strip_prefix("r="))
            .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_graphic() && b != b','))
            .ok_or(ScramError::Malformed("missing client nonce"))?;
        let mut raw = [0u8; SERVER_NONCE_BYTES];
        SystemRandom::new().fill(&mut raw).map_err(|_| ScramError::Malformed("no system randomness"))?;
        let nonce = format!("{client_nonce}{}", B64.encode(raw));
        let (verifier, known_user) = match role {
            Some(v) if !users.knows(user) => (v.clone(), true),
            _ => users.verifier(user),
        };
        let server_first = format!("r={nonce},s={},i={}", B64.encode(&verifier.salt), verifier.iterations);
        let exchange = Exchange {
            verifier,
            known_user,
            gs2_header: format!("{gs2_flag},{authzid},"),
            client_first_bare: bare.to_owned(),
            server_first: server_first.clone(),
            nonce,
        };
        Ok((exchange, server_first))
    }

    /// Handles client-final-message; returns server-final-message when the
    /// proof is right.
    pub fn finish(self, client_final: &[u8]) -> Result<String, ScramError> {
        let text = std::str::from_utf8(client_final).map_err(|_| ScramError::Malformed("message is not UTF-8"))?;
        let (without_proof, proof) = text.rsplit_once(",p=").ok_or(ScramError::Malformed("missing proof"))?;
        let mut binding = None;
        let mut nonce = None;
        for attr in without_proof.split(',') {
            if let Some(c) = attr.strip_prefix("c=") {
                binding = Some(c);
            } else if let Some(r) = attr.strip_prefix("r=") {
                nonce = Some(r);
            }
        }
        let binding = B64
            .decode(binding.ok_or(ScramError::Malformed("missing channel binding"))?)
            .map_err(|_| ScramError::Malformed("bad channel binding"))?;
        if binding != self.gs2_header.as_bytes() {
            return Err(ScramError::Malformed("channel binding does not match"));
        }
        if nonce != Some(self.nonce.as_str()) {
            return Err(ScramError::Malformed("nonce does not match"));
        }
        let proof = B64.decode(proof).map_err(|_| ScramError::Malformed("bad proof"))?;
        if proof.len() != 32 {
            return Err(ScramError::Malformed("bad proof length"));
        }
        let auth_message = format!("{},{},{without_proof}", self.client_first_bare, self.server_first);
        let stored = hmac::Key::new(hmac::HMAC_SHA256, &self.verifier.stored_key);
        let client_signature = hmac::sign(&stored, auth_message.as_bytes());
        let client_key: Vec<u8> = proof.iter().zip(client_signature.as_ref()).map(|(a, b)| a ^ b).collect();
        let computed = digest::digest(&digest::SHA256, &client_key);
        // Constant-time comparison: no early exit on the first differing byte.
        let diff = computed.as_ref().iter().zip(&self.verifier.stored_key).fold(0u8, |acc, (a, b)| acc | (a ^ b));
        if diff != 0 || !self.known_user {
            return Err(ScramError::Failed);
        }
        let server = hmac::Key::new(hmac::HMAC_SHA256, &self.verifier.server_key);
        let server_signature = hmac::sign(&server, auth_message.as_bytes());
        Ok(format!("v={}", B64.encode(server_signature.as_ref())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plaintext_and_verifier_forms_parse() {
        let v = Verifier::from_password("secret").unwrap();
        assert_eq!(v.iterations, 4096);
        assert!(Verifier::parse("SCRAM-SHA-256$4096:c2FsdA==$bad").is_none());
        assert!(Verifier::parse("md5abc").is_none());
    }
}
