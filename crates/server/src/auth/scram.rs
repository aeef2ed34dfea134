//! SCRAM (RFC 5802; SHA-256 per RFC 7677), server side, as MongoDB speaks it: no channel
//! binding, user names not SASLprepped, SCRAM-SHA-1 keyed by MongoDB's MD5 "digest password"
//! and SCRAM-SHA-256 by the SASLprepped password itself.
//!
//! Pure: no I/O and no clock. A stored [`Credential`] holds the salt, iteration count and the
//! two keys SCRAM derives from the password (StoredKey, ServerKey): the password cannot be
//! recovered from it. A [`Conversation`] is one authentication in progress: it is created from
//! the client's first message and the user's credential, answers with the server's first
//! message, and checks the client's proof, in constant time, against the StoredKey.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use hmac::{KeyInit, Mac};
use sha1::Sha1;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// Why a SCRAM message was refused. The client only ever sees "Authentication failed." (the
/// reason goes to the log), so a forged message learns nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScramError(pub String);

impl std::fmt::Display for ScramError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn refuse<T>(why: impl Into<String>) -> Result<T, ScramError> {
    Err(ScramError(why.into()))
}

/// The SCRAM variants MongoDB offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mechanism {
    Sha1,
    Sha256,
}

impl Mechanism {
    pub const ALL: [Mechanism; 2] = [Mechanism::Sha1, Mechanism::Sha256];

    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Sha1 => "SCRAM-SHA-1",
            Mechanism::Sha256 => "SCRAM-SHA-256",
        }
    }

    pub fn from_name(name: &str) -> Option<Mechanism> {
        Mechanism::ALL.into_iter().find(|mechanism| mechanism.name() == name)
    }

    /// mongod's defaults (`scramIterationCount`, `scramSHA256IterationCount`).
    pub fn default_iterations(self) -> u32 {
        match self {
            Mechanism::Sha1 => 10_000,
            Mechanism::Sha256 => 15_000,
        }
    }

    /// mongod's salt lengths: the hash's length less four bytes.
    fn salt_len(self) -> usize {
        self.hash_len() - 4
    }

    fn hash_len(self) -> usize {
        match self {
            Mechanism::Sha1 => 20,
            Mechanism::Sha256 => 32,
        }
    }

    pub fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            Mechanism::Sha1 => Sha1::digest(data).to_vec(),
            Mechanism::Sha256 => Sha256::digest(data).to_vec(),
        }
    }

    pub fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        fn run<M: Mac + KeyInit>(key: &[u8], data: &[u8]) -> Vec<u8> {
            // HMAC takes a key of any length; `new_from_slice` cannot fail for it.
            match <M as KeyInit>::new_from_slice(key) {
                Ok(mut mac) => {
                    mac.update(data);
                    mac.finalize().into_bytes().to_vec()
                }
                Err(_) => Vec::new(),
            }
        }
        match self {
            Mechanism::Sha1 => run::<hmac::Hmac<Sha1>>(key, data),
            Mechanism::Sha256 => run::<hmac::Hmac<Sha256>>(key, data),
        }
    }

    /// `Hi(password, salt, i)`: PBKDF2 with this mechanism's HMAC.
    pub fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        let mut out = vec![0; self.hash_len()];
        match self {
            Mechanism::Sha1 => pbkdf2::pbkdf2_hmac::<Sha1>(password, salt, iterations, &mut out),
            Mechanism::Sha256 => pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, iterations, &mut out),
        }
        out
    }

    /// The bytes SCRAM's key derivation starts from: MongoDB's digest for SHA-1, the
    /// SASLprepped password for SHA-256.
    pub fn normalized_password(self, user: &str, password: &str) -> Result<Vec<u8>, ScramError> {
        match self {
            Mechanism::Sha1 => Ok(digest_password(user, password).into_bytes()),
            Mechanism::Sha256 => match stringprep::saslprep(password) {
                Ok(prepared) => Ok(prepared.as_bytes().to_vec()),
                Err(error) => refuse(format!("the password cannot be prepared with SASLprep: {error}")),
            },
        }
    }
}

/// MongoDB's "digest password": hex(MD5(user ":mongo:" password)), SCRAM-SHA-1's input.
pub fn digest_password(user: &str, password: &str) -> String {
    let digest = md5::Md5::digest(format!("{user}:mongo:{password}").as_bytes());
    digest.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// What the server stores of a password, for one mechanism.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credential {
    pub iterations: u32,
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
}

impl Credential {
    /// Derives a credential from the normalized password (see
    /// [`Mechanism::normalized_password`]).
    pub fn derive(mechanism: Mechanism, normalized: &[u8], salt: Vec<u8>, iterations: u32) -> Credential {
        let salted = mechanism.salted_password(normalized, &salt, iterations);
        let client_key = mechanism.hmac(&salted, b"Client Key");
        Credential {
            iterations,
            stored_key: mechanism.hash(&client_key),
            server_key: mechanism.hmac(&salted, b"Server Key"),
            salt,
        }
    }

    /// A new credential from a normalized password (see [`Mechanism::normalized_password`])
    /// with a fresh random salt and mongod's default iteration count.
    pub fn generate(mechanism: Mechanism, normalized: &[u8]) -> Credential {
        let salt = random_bytes(mechanism.salt_len());
        Credential::derive(mechanism, normalized, salt, mechanism.default_iterations())
    }
}

pub fn random_bytes(len: usize) -> Vec<u8> {
    use rand::RngCore;
    let mut bytes = vec![0; len];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    bytes
}

/// The client's first message, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientFirst {
    /// The user name, unescaped (`=2C` → `,`, `=3D` → `=`).
    pub user: String,
    pub nonce: String,
    /// The GS2 header ("n,,"), which the final message's `c=` must repeat.
    gs2_header: String,
    /// The message without its GS2 header: part of what both proofs sign.
    bare: String,
}

/// Most bytes of a SCRAM message the server accepts (a user name, a nonce, a proof).
pub const MAX_MESSAGE_BYTES: usize = 4096;

impl ClientFirst {
    pub fn parse(payload: &[u8]) -> Result<ClientFirst, ScramError> {
        let text = message_text(payload)?;
        let (gs2_header, bare) = split_gs2_header(text)?;
        let mut fields = bare.split(',');
        let user = match fields.next().and_then(|field| field.strip_prefix("n=")) {
            Some(name) => unescape_name(name)?,
            None => return refuse("the first message has no user name (n=)"),
        };
        let nonce = match fields.next().and_then(|field| field.strip_prefix("r=")) {
            Some(nonce) if valid_nonce(nonce) => nonce.to_owned(),
            _ => return refuse("the first message has no valid nonce (r=)"),
        };
        if fields.any(|field| field.starts_with("m=")) {
            return refuse("mandatory SCRAM extensions are not supported");
        }
        if user.is_empty() {
            return refuse("the user name is empty");
        }
        Ok(ClientFirst { user, nonce, gs2_header: gs2_header.to_owned(), bare: bare.to_owned() })
    }
}

fn message_text(payload: &[u8]) -> Result<&str, ScramError> {
    if payload.len() > MAX_MESSAGE_BYTES {
        return refuse("the SCRAM message is too long");
    }
    std::str::from_utf8(payload).or_else(|_| refuse("the SCRAM message is not UTF-8"))
}

/// "n,," or "y,," (an authzid `a=` is refused: MongoDB authenticates as the named user only).
fn split_gs2_header(text: &str) -> Result<(&str, &str), ScramError> {
    let (flag, rest) = text.split_once(',').ok_or_else(|| ScramError("no GS2 header".into()))?;
    if flag.starts_with("p=") {
        return refuse("channel binding is not supported");
    }
    if flag != "n" && flag != "y" {
        return refuse("the GS2 channel-binding flag is not 'n' or 'y'");
    }
    let (authzid, bare) = rest.split_once(',').ok_or_else(|| ScramError("the GS2 header is incomplete".into()))?;
    if !authzid.is_empty() {
        return refuse("an authorization identity (a=) is not supported");
    }
    let header = text.get(..flag.len() + authzid.len() + 2).unwrap_or_default();
    Ok((header, bare))
}

/// A nonce is printable ASCII without ','.
fn valid_nonce(nonce: &str) -> bool {
    !nonce.is_empty() && nonce.bytes().all(|byte| (0x21..=0x7e).contains(&byte) && byte != b',')
}

/// RFC 5802's saslname: ',' and '=' travel as "=2C" and "=3D"; any other '=' is malformed.
fn unescape_name(name: &str) -> Result<String, ScramError> {
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some((before, after)) = rest.split_once('=') {
        out.push_str(before);
        let escaped = match after.get(..2) {
            Some("2C") => ',',
            Some("3D") => '=',
            _ => return refuse("the user name has a malformed escape"),
        };
        out.push(escaped);
        rest = after.get(2..).unwrap_or_default();
    }
    out.push_str(rest);
    Ok(out)
}

/// One authentication in progress, between the server's first message and the client's proof.
#[derive(Debug, Clone)]
pub struct Conversation {
    pub mechanism: Mechanism,
    pub user: String,
    credential: Credential,
    gs2_header: String,
    /// client-first-bare "," server-first: the start of the signed AuthMessage.
    signed_prefix: String,
    nonce: String,
}

impl Conversation {
    /// Starts a conversation: returns it with the server's first message. `server_nonce` is
    /// random printable text (see [`server_nonce`]).
    pub fn start(
        mechanism: Mechanism,
        first: ClientFirst,
        credential: Credential,
        server_nonce: &str,
    ) -> (Conversation, String) {
        let nonce = format!("{}{server_nonce}", first.nonce);
        let server_first = format!("r={nonce},s={},i={}", BASE64.encode(&credential.salt), credential.iterations);
        let conversation = Conversation {
            mechanism,
            user: first.user,
            credential,
            gs2_header: first.gs2_header,
            signed_prefix: format!("{},{server_first}", first.bare),
            nonce,
        };
        (conversation, server_first)
    }

    /// Checks the client's final message; on success returns the server's final message
    /// (`v=ServerSignature`), which proves to the client that the server knows the password too.
    pub fn finish(&self, payload: &[u8]) -> Result<String, ScramError> {
        let text = message_text(payload)?;
        let (without_proof, proof) = text.rsplit_once(",p=").ok_or_else(|| ScramError("no proof (p=)".into()))?;
        let mut fields = without_proof.split(',');
        let binding = fields.next().and_then(|field| field.strip_prefix("c="));
        if binding != Some(BASE64.encode(&self.gs2_header).as_str()) {
            return refuse("the channel binding (c=) does not repeat the GS2 header");
        }
        if fields.next().and_then(|field| field.strip_prefix("r=")) != Some(self.nonce.as_str()) {
            return refuse("the nonce (r=) is not the one this conversation agreed");
        }
        let proof = BASE64.decode(proof).or_else(|_| refuse("the proof is not base64"))?;
        if proof.len() != self.mechanism.hash_len() {
            return refuse("the proof has the wrong length");
        }
        let auth_message = format!("{},{without_proof}", self.signed_prefix);
        let client_signature = self.mechanism.hmac(&self.credential.stored_key, auth_message.as_bytes());
        let client_key: Vec<u8> = proof.iter().zip(&client_signature).map(|(p, s)| p ^ s).collect();
        let stored_key = self.mechanism.hash(&client_key);
        if !bool::from(stored_key.ct_eq(&self.credential.stored_key)) {
            return refuse("the proof is wrong (wrong password)");
        }
        let server_signature = self.mechanism.hmac(&self.credential.server_key, auth_message.as_bytes());
        Ok(format!("v={}", BASE64.encode(server_signature)))
    }
}

/// A fresh server nonce: 24 random bytes, base64 (printable, no ',').
pub fn server_nonce() -> String {
    BASE64.encode(random_bytes(24))
}

/// A credential for a user that does not exist: the conversation goes on to the proof (which
/// fails), with a salt derived from the name and a per-process secret, so that a client cannot
/// tell an unknown user from a wrong password, not even by asking twice.
pub fn decoy_credential(mechanism: Mechanism, secret: &[u8], user: &str) -> Credential {
    let mut salt = mechanism.hmac(secret, user.as_bytes());
    salt.truncate(mechanism.salt_len());
    Credential {
        iterations: mechanism.default_iterations(),
        stored_key: mechanism.hmac(secret, b"stored"),
        server_key: mechanism.hmac(secret, b"server"),
        salt,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conversation(
        mechanism: Mechanism,
        normalized: &[u8],
        client_first: &str,
        server_first: &str,
    ) -> (Conversation, String) {
        // Rebuild the server's side from the published server-first message.
        let fields: Vec<&str> = server_first.split(',').collect();
        let nonce = fields[0].strip_prefix("r=").unwrap();
        let salt = BASE64.decode(fields[1].strip_prefix("s=").unwrap()).unwrap();
        let iterations: u32 = fields[2].strip_prefix("i=").unwrap().parse().unwrap();
        let first = ClientFirst::parse(client_first.as_bytes()).unwrap();
        let server_part = nonce.strip_prefix(first.nonce.as_str()).unwrap().to_owned();
        let credential = Credential::derive(mechanism, normalized, salt, iterations);
        Conversation::start(mechanism, first, credential, &server_part)
    }

    /// Goal: the server side reproduces the published conversations byte for byte. Method: the
    /// SCRAM-SHA-256 example of RFC 7677 (also the MongoDB auth specification's), and the
    /// SCRAM-SHA-1 example of the MongoDB auth specification (password digested).
    #[test]
    fn published_conversations() {
        let client_final = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
        let server_first = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
        let normalized = Mechanism::Sha256.normalized_password("user", "pencil").unwrap();
        let (conv, sent) =
            conversation(Mechanism::Sha256, &normalized, "n,,n=user,r=rOprNGfwEbeRWgbNEkqO", server_first);
        assert_eq!(sent, server_first);
        assert_eq!(conv.finish(client_final.as_bytes()).unwrap(), "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=");

        let server_first =
            "r=fyko+d2lbbFgONRv9qkxdawLHo+Vgk7qvUOKUwuWLIWg4l/9SraGMHEE,s=rQ9ZY3MntBeuP3E1TDVC4w==,i=10000";
        let client_final =
            "c=biws,r=fyko+d2lbbFgONRv9qkxdawLHo+Vgk7qvUOKUwuWLIWg4l/9SraGMHEE,p=MC2T8BvbmWRckDw8oWl5IVghwCY=";
        let normalized = Mechanism::Sha1.normalized_password("user", "pencil").unwrap();
        let (conv, sent) =
            conversation(Mechanism::Sha1, &normalized, "n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL", server_first);
        assert_eq!(sent, server_first);
        assert_eq!(conv.finish(client_final.as_bytes()).unwrap(), "v=UMWeI25JD1yNYZRMpZ4VHvhZ9e0=");
    }

    /// Goal: RFC 5802's own SCRAM-SHA-1 example (raw password, no MongoDB digest) passes too,
    /// so the SHA-1 arithmetic is checked independently of the digest.
    #[test]
    fn rfc_5802_example() {
        let server_first = "r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096";
        let client_final = "c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=";
        let (conv, _) = conversation(Mechanism::Sha1, b"pencil", "n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL", server_first);
        assert_eq!(conv.finish(client_final.as_bytes()).unwrap(), "v=rmF9pqV8S7suAoZWja4dJRkFsKQ=");
    }

    /// Goal: a wrong proof, a changed nonce or channel binding, and a replayed final message in
    /// a new conversation are all refused.
    #[test]
    fn forged_final_messages_are_refused() {
        let server_first = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
        let normalized = Mechanism::Sha256.normalized_password("user", "pencil").unwrap();
        let (conv, _) = conversation(Mechanism::Sha256, &normalized, "n,,n=user,r=rOprNGfwEbeRWgbNEkqO", server_first);
        let good = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
        for forged in [
            good.replace("p=dH", "p=eH"),
            good.replace("c=biws", "c=eSws"),
            good.replace("hNlF$k0", "hNlF$k1"),
            good.replace(",p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=", ",p=AAAA"),
            good.replace(",p=", ",x="),
            String::new(),
        ] {
            assert!(conv.finish(forged.as_bytes()).is_err(), "accepted {forged}");
        }
        // The same final message against a conversation with a fresh server nonce.
        let first = ClientFirst::parse(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO").unwrap();
        let credential = Credential::derive(Mechanism::Sha256, &normalized, vec![1; 28], 4096);
        let (fresh, _) = Conversation::start(Mechanism::Sha256, first, credential, &server_nonce());
        assert!(fresh.finish(good.as_bytes()).is_err());
    }

    #[test]
    fn client_first_parsing() {
        let first = ClientFirst::parse(b"n,,n=a=2Cb=3Dc,r=abc").unwrap();
        assert_eq!(first.user, "a,b=c");
        for bad in [
            &b"p=tls-unique,,n=user,r=abc"[..],
            b"n,a=admin,n=user,r=abc",
            b"n,,n=user",
            b"n,,n=,r=abc",
            b"n,,n=us=er,r=abc",
            b"n,,n=user,r=abc,m=ext",
            b"x,,n=user,r=abc",
            b"n,,n=user,r=a b",
            b"\xff\xfe",
            b"",
        ] {
            assert!(ClientFirst::parse(bad).is_err(), "accepted {:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn generated_credentials_match_their_password_only() {
        for mechanism in Mechanism::ALL {
            let credential = Credential::generate(mechanism, &mechanism.normalized_password("ann", "secret").unwrap());
            assert_eq!(credential.iterations, mechanism.default_iterations());
            let again = |password: &str| {
                let normalized = mechanism.normalized_password("ann", password).unwrap();
                Credential::derive(mechanism, &normalized, credential.salt.clone(), credential.iterations).stored_key
            };
            assert_eq!(again("secret"), credential.stored_key);
            assert_ne!(again("Secret"), credential.stored_key);
        }
        assert_eq!(digest_password("user", "pencil"), "1c33006ec1ffd90f9cadcbcc0e118200");
    }
}
