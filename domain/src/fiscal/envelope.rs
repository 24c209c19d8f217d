//! EFRIS's system-to-system envelope: `data` (the content, base64, AES
//! encrypted with the symmetric key from `T104` when encryption is on; its
//! signature, SHA1withRSA over the content as sent; how it is encoded),
//! `globalInfo` (who sends which interface, when) and `returnStateInfo`
//! (the answer's code and message). The crypto is the maintained RustCrypto
//! crates': AES-128 in ECB mode with PKCS#7 padding as EFRIS specifies,
//! RSA PKCS#1 v1.5 signatures over SHA-1, and the symmetric key handed over
//! encrypted with the taxpayer's public key (`passowrdDes`, EFRIS's
//! spelling).

use aes::cipher::{block_padding::Pkcs7, BlockDecryptMut, BlockEncryptMut, KeyInit};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use rsa::pkcs1v15::{Signature, SigningKey, VerifyingKey};
use rsa::signature::{SignatureEncoding, Signer, Verifier};
use rsa::{Pkcs1v15Encrypt, RsaPrivateKey, RsaPublicKey};
use serde::{Deserialize, Serialize};
use sha1::Sha1;

/// The answer code of success.
pub const SUCCESS: &str = "00";

/// Why an envelope could not be sealed or opened.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EnvelopeError {
    #[error("the content is not valid base64")]
    Base64,
    #[error("the content does not decrypt with the symmetric key")]
    Decrypt,
    #[error("the signature does not match the content")]
    Signature,
    #[error("the symmetric key is not 16 bytes")]
    KeyLength,
    #[error("RSA failed: {0}")]
    Rsa(String),
}

/// The symmetric key obtained through `T104` (AES-128).
#[derive(Clone, PartialEq, Eq)]
pub struct AesKey([u8; 16]);

impl std::fmt::Debug for AesKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AesKey(..)")
    }
}

impl AesKey {
    pub fn new(bytes: [u8; 16]) -> AesKey {
        AesKey(bytes)
    }

    pub fn from_slice(bytes: &[u8]) -> Result<AesKey, EnvelopeError> {
        let arr: [u8; 16] = bytes.try_into().map_err(|_| EnvelopeError::KeyLength)?;
        Ok(AesKey(arr))
    }

    /// A fresh random key (the authority's side of `T104`).
    pub fn random() -> AesKey {
        AesKey(rand::random())
    }

    pub fn bytes(&self) -> &[u8; 16] {
        &self.0
    }
}

type Aes128EcbEnc = ecb::Encryptor<aes::Aes128>;
type Aes128EcbDec = ecb::Decryptor<aes::Aes128>;

pub fn aes_encrypt(key: &AesKey, plain: &[u8]) -> Vec<u8> {
    Aes128EcbEnc::new(&key.0.into()).encrypt_padded_vec_mut::<Pkcs7>(plain)
}

pub fn aes_decrypt(key: &AesKey, cipher: &[u8]) -> Result<Vec<u8>, EnvelopeError> {
    Aes128EcbDec::new(&key.0.into())
        .decrypt_padded_vec_mut::<Pkcs7>(cipher)
        .map_err(|_| EnvelopeError::Decrypt)
}

/// SHA1withRSA over `content` (the base64 text as sent), base64.
pub fn sign(key: &RsaPrivateKey, content: &str) -> String {
    let signer = SigningKey::<Sha1>::new(key.clone());
    B64.encode(signer.sign(content.as_bytes()).to_vec())
}

pub fn verify(key: &RsaPublicKey, content: &str, signature: &str) -> Result<(), EnvelopeError> {
    let raw = B64
        .decode(signature.trim())
        .map_err(|_| EnvelopeError::Base64)?;
    let sig = Signature::try_from(raw.as_slice()).map_err(|_| EnvelopeError::Signature)?;
    VerifyingKey::<Sha1>::new(key.clone())
        .verify(content.as_bytes(), &sig)
        .map_err(|_| EnvelopeError::Signature)
}

/// The authority's side of `T104`: the symmetric key, base64, encrypted
/// with the taxpayer's public key, base64 again (`passowrdDes`).
pub fn wrap_key(public: &RsaPublicKey, key: &AesKey) -> Result<String, EnvelopeError> {
    let inner = B64.encode(key.0);
    let sealed = public
        .encrypt(&mut rand::rngs::OsRng, Pkcs1v15Encrypt, inner.as_bytes())
        .map_err(|e| EnvelopeError::Rsa(e.to_string()))?;
    Ok(B64.encode(sealed))
}

/// The taxpayer's side of `T104`: the symmetric key out of `passowrdDes`.
pub fn unwrap_key(private: &RsaPrivateKey, wrapped: &str) -> Result<AesKey, EnvelopeError> {
    let sealed = B64
        .decode(wrapped.trim())
        .map_err(|_| EnvelopeError::Base64)?;
    let inner = private
        .decrypt(Pkcs1v15Encrypt, &sealed)
        .map_err(|e| EnvelopeError::Rsa(e.to_string()))?;
    let raw = B64.decode(inner).map_err(|_| EnvelopeError::Base64)?;
    AesKey::from_slice(&raw)
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct DataDescription {
    /// "0" plain text, "1" cipher text.
    pub code_type: String,
    /// "1" plain (signed only), "2" AES.
    pub encrypt_code: String,
    /// "0" not compressed, "1" gzip.
    pub zip_code: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Data {
    pub content: String,
    pub signature: String,
    pub data_description: DataDescription,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct GlobalInfo {
    pub app_id: String,
    pub version: String,
    pub data_exchange_id: String,
    pub interface_code: String,
    pub request_code: String,
    pub request_time: String,
    pub response_code: String,
    pub user_name: String,
    #[serde(rename = "deviceMAC")]
    pub device_mac: String,
    pub device_no: String,
    pub tin: String,
    pub brn: String,
    #[serde(rename = "taxpayerID")]
    pub taxpayer_id: String,
    pub longitude: String,
    pub latitude: String,
    #[serde(default)]
    pub extend_field: serde_json::Value,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ReturnStateInfo {
    pub return_code: String,
    pub return_message: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Envelope {
    pub data: Data,
    pub global_info: GlobalInfo,
    pub return_state_info: ReturnStateInfo,
}

/// Seals `content` (JSON text): encrypted when `key` is given, signed when
/// `signer` is.
pub fn seal(content: &[u8], key: Option<&AesKey>, signer: Option<&RsaPrivateKey>) -> Data {
    let (content, code_type, encrypt_code) = match key {
        Some(k) => (B64.encode(aes_encrypt(k, content)), "1", "2"),
        None => (B64.encode(content), "0", "1"),
    };
    let signature = match signer {
        Some(s) if !content.is_empty() => sign(s, &content),
        _ => String::new(),
    };
    Data {
        content,
        signature,
        data_description: DataDescription {
            code_type: code_type.to_owned(),
            encrypt_code: encrypt_code.to_owned(),
            zip_code: "0".to_owned(),
        },
    }
}

/// Opens `data`: checks the signature when `verifier` is given, then
/// decodes (and decrypts, when the description says so) the content.
pub fn open(
    data: &Data,
    key: Option<&AesKey>,
    verifier: Option<&RsaPublicKey>,
) -> Result<Vec<u8>, EnvelopeError> {
    if let Some(v) = verifier {
        verify(v, &data.content, &data.signature)?;
    }
    let raw = B64
        .decode(data.content.trim())
        .map_err(|_| EnvelopeError::Base64)?;
    if data.data_description.code_type == "1" {
        let key = key.ok_or(EnvelopeError::Decrypt)?;
        return aes_decrypt(key, &raw);
    }
    Ok(raw)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::{any, proptest, ProptestConfig};
    use rsa::pkcs8::DecodePrivateKey;

    /// A fixed 1024-bit test key (tests only; small so they run fast).
    pub(crate) const TEST_KEY: &str = include_str!("testdata/test_key.pem");

    fn key() -> RsaPrivateKey {
        RsaPrivateKey::from_pkcs8_pem(TEST_KEY).unwrap()
    }

    const FIXED_KEY: [u8; 16] = *b"0123456789abcdef";
    const FIXED_PAYLOAD: &str = r#"{"sellerDetails":{"referenceNo":"HQ-000001"}}"#;

    #[test]
    fn fixed_payload_encrypts_to_the_pinned_cipher_text() {
        let k = AesKey::new(FIXED_KEY);
        let cipher = B64.encode(aes_encrypt(&k, FIXED_PAYLOAD.as_bytes()));
        // Pinned: AES-128-ECB, PKCS#7, of the fixed payload under the
        // fixed key (the same as `openssl enc -aes-128-ecb`).
        assert_eq!(cipher, PINNED_CIPHER.trim());
        assert_eq!(
            aes_decrypt(&k, &B64.decode(cipher).unwrap()).unwrap(),
            FIXED_PAYLOAD.as_bytes()
        );
    }

    const PINNED_CIPHER: &str = include_str!("testdata/test_cipher.txt");

    #[test]
    fn fixed_payload_signature_is_pinned_and_verifies() {
        let k = key();
        let data = seal(
            FIXED_PAYLOAD.as_bytes(),
            Some(&AesKey::new(FIXED_KEY)),
            Some(&k),
        );
        assert_eq!(data.data_description.code_type, "1");
        assert_eq!(data.data_description.encrypt_code, "2");
        // PKCS#1 v1.5 signatures are deterministic: pinned.
        assert_eq!(data.signature, PINNED_SIGNATURE.trim());
        let opened = open(
            &data,
            Some(&AesKey::new(FIXED_KEY)),
            Some(&k.to_public_key()),
        )
        .unwrap();
        assert_eq!(opened, FIXED_PAYLOAD.as_bytes());
    }

    const PINNED_SIGNATURE: &str = include_str!("testdata/test_signature.txt");

    #[test]
    fn a_changed_content_fails_the_signature() {
        let k = key();
        let mut data = seal(FIXED_PAYLOAD.as_bytes(), None, Some(&k));
        data.content = B64.encode(b"{\"tampered\":true}");
        assert_eq!(
            open(&data, None, Some(&k.to_public_key())),
            Err(EnvelopeError::Signature)
        );
    }

    #[test]
    fn a_wrong_key_does_not_decrypt() {
        let data = seal(
            FIXED_PAYLOAD.as_bytes(),
            Some(&AesKey::new(FIXED_KEY)),
            None,
        );
        let other = AesKey::new(*b"fedcba9876543210");
        assert!(open(&data, Some(&other), None) != Ok(FIXED_PAYLOAD.as_bytes().to_vec()));
    }

    #[test]
    fn the_symmetric_key_round_trips_through_t104() {
        let k = key();
        let aes = AesKey::new(FIXED_KEY);
        let wrapped = wrap_key(&k.to_public_key(), &aes).unwrap();
        assert_eq!(unwrap_key(&k, &wrapped).unwrap(), aes);
    }

    #[test]
    fn the_envelope_uses_efris_field_names() {
        let env = Envelope {
            data: seal(b"{}", None, None),
            global_info: GlobalInfo {
                interface_code: "T109".into(),
                device_mac: "FFFFFFFFFFFF".into(),
                ..GlobalInfo::default()
            },
            return_state_info: ReturnStateInfo::default(),
        };
        let v = serde_json::to_value(&env).unwrap();
        assert_eq!(v["globalInfo"]["interfaceCode"], "T109");
        assert_eq!(v["globalInfo"]["deviceMAC"], "FFFFFFFFFFFF");
        assert!(v["globalInfo"].get("taxpayerID").is_some());
        assert!(v["globalInfo"].get("dataExchangeId").is_some());
        assert_eq!(v["data"]["dataDescription"]["zipCode"], "0");
        assert!(v["returnStateInfo"].get("returnCode").is_some());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn any_content_round_trips(content in proptest::collection::vec(any::<u8>(), 0..600),
                                   raw_key in any::<[u8; 16]>(),
                                   encrypted in any::<bool>()) {
            let k = AesKey::new(raw_key);
            let key = encrypted.then_some(&k);
            let data = seal(&content, key, None);
            proptest::prop_assert_eq!(open(&data, key, None).unwrap(), content);
        }
    }

    #[test]
    fn signed_contents_round_trip() {
        let k = key();
        let public = k.to_public_key();
        for n in [0usize, 1, 15, 16, 17, 255, 1024] {
            let content: Vec<u8> = (0..n).map(|i| (i * 7 % 251) as u8).collect();
            let data = seal(&content, Some(&AesKey::new(FIXED_KEY)), Some(&k));
            assert_eq!(
                open(&data, Some(&AesKey::new(FIXED_KEY)), Some(&public)).unwrap(),
                content
            );
        }
    }
}
