//! Certificate generation for `--self-signed` mode and tests: a CA and a
//! serving certificate for the webhook Service's DNS names (rcgen, ring).

use std::time::{SystemTime, UNIX_EPOCH};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
};

/// A certificate that could not be generated.
#[derive(Debug, thiserror::Error)]
#[error("generating certificates: {0}")]
pub struct CertError(String);

impl From<rcgen::Error> for CertError {
    fn from(e: rcgen::Error) -> Self {
        Self(e.to_string())
    }
}

/// A CA and a serving certificate signed by it, in PEM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GeneratedCerts {
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
    /// The names the serving certificate is valid for.
    pub names: Vec<String>,
    /// Expiry of both certificates, seconds since the Unix epoch.
    pub not_after_unix: i64,
}

/// The names the API server may use to reach a Service.
pub fn service_dns_names(service: &str, namespace: &str) -> Vec<String> {
    vec![
        service.to_owned(),
        format!("{service}.{namespace}"),
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
    ]
}

/// Civil date (year, month, day) of a day count since 1970-01-01.
fn civil_from_days(days: i64) -> (i32, u8, u8) {
    // Howard Hinnant's algorithm.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u8;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u8;
    ((if m <= 2 { y + 1 } else { y }) as i32, m, d)
}

fn day_of(unix: i64) -> (i32, u8, u8) {
    civil_from_days(unix.div_euclid(86_400))
}

/// Generates a CA and a serving certificate for `names` (DNS names or IP
/// addresses), valid from the day before `now` for `days` days.
pub fn generate(names: &[String], now: SystemTime, days: u32) -> Result<GeneratedCerts, CertError> {
    if names.is_empty() {
        return Err(CertError("no names for the serving certificate".to_owned()));
    }
    let now_unix = now
        .duration_since(UNIX_EPOCH)
        .map_err(|e| CertError(e.to_string()))?
        .as_secs() as i64;
    let not_after_unix = (now_unix.div_euclid(86_400) + i64::from(days)) * 86_400;
    let before = day_of(now_unix - 86_400);
    let after = day_of(not_after_unix);
    let not_before = || rcgen::date_time_ymd(before.0, before.1, before.2);
    let not_after = || rcgen::date_time_ymd(after.0, after.1, after.2);

    let ca_key = KeyPair::generate()?;
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca.distinguished_name.push(DnType::CommonName, "sluice-webhook-ca");
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    ca.not_before = not_before();
    ca.not_after = not_after();
    let ca_cert = ca.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca, ca_key);

    let key = KeyPair::generate()?;
    let mut leaf = CertificateParams::new(names.to_vec())?;
    leaf.distinguished_name.push(DnType::CommonName, names[0].as_str());
    leaf.is_ca = IsCa::ExplicitNoCa;
    leaf.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    leaf.not_before = not_before();
    leaf.not_after = not_after();
    let cert = leaf.signed_by(&key, &issuer)?;

    Ok(GeneratedCerts {
        ca_pem: ca_cert.pem(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
        names: names.to_vec(),
        not_after_unix,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_723), (2024, 1, 1));
        assert_eq!(civil_from_days(19_782), (2024, 2, 29));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
    }

    #[test]
    fn generated_pair_loads_into_rustls_and_chains_to_the_ca() {
        let names = service_dns_names("sluice-webhook", "sluice-system");
        assert_eq!(names[3], "sluice-webhook.sluice-system.svc.cluster.local");
        let now = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let g = generate(&names, now, 365).unwrap();
        assert!(g.ca_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(g.key_pem.contains("PRIVATE KEY"));
        assert_eq!(g.not_after_unix, (1_800_000_000 / 86_400 + 365) * 86_400);
        // The serving pair is consistent.
        crate::tls::certified_key_from_pem(g.cert_pem.as_bytes(), g.key_pem.as_bytes(), "test").unwrap();
        // And a client trusting only the CA accepts it for the service name.
        use rustls::client::danger::ServerCertVerifier;
        use rustls::pki_types::pem::PemObject;
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(rustls::pki_types::CertificateDer::from_pem_slice(g.ca_pem.as_bytes()).unwrap())
            .unwrap();
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
            std::sync::Arc::new(roots),
            crate::tls::provider(),
        )
        .build()
        .unwrap();
        let leaf = rustls::pki_types::CertificateDer::from_pem_slice(g.cert_pem.as_bytes()).unwrap();
        let at = rustls::pki_types::UnixTime::since_unix_epoch(Duration::from_secs(1_800_000_000));
        for name in ["sluice-webhook.sluice-system.svc", "sluice-webhook"] {
            let server = rustls::pki_types::ServerName::try_from(name).unwrap();
            verifier
                .verify_server_cert(&leaf, &[], &server, &[], at)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        let other = rustls::pki_types::ServerName::try_from("evil.example").unwrap();
        assert!(verifier.verify_server_cert(&leaf, &[], &other, &[], at).is_err());
    }

    #[test]
    fn ip_names_become_ip_sans() {
        let g = generate(&["127.0.0.1".to_owned()], SystemTime::now(), 1).unwrap();
        crate::tls::certified_key_from_pem(g.cert_pem.as_bytes(), g.key_pem.as_bytes(), "t").unwrap();
        assert!(generate(&[], SystemTime::now(), 1).is_err());
    }
}
