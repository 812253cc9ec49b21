import Foundation

/// A certificate authority for the tests: a self-signed CA certificate and a server certificate signed by it for
/// `localhost`, 127.0.0.1 and ::1 (P-256 keys, valid for a hundred years from 2026-11-28). Give it to
/// `TestHTTPServer(tls:)`, and `caPEM` (or the file from `writeCAPEM(to:)`) to the client that should trust the
/// server.
///
/// There are three, each unrelated to the others (their own keys and names): `TestCertificateAuthority(1)` is an
/// untrusted CA for a client that trusts only `TestCertificateAuthority()`. They were made once with the
/// openssl command line (scripts/make-test-certificates) and are kept here, so that no X.509 or
/// crypto library is built for the tests (swift-certificates and swift-crypto cost every build minutes).
public struct TestCertificateAuthority: Sendable {
    /// The CA's subject common name.
    public let commonName: String
    /// The CA certificate, PEM ("-----BEGIN CERTIFICATE-----").
    public let caPEM: String
    /// The CA certificate, DER.
    public let caDER: [UInt8]
    /// The server (leaf) certificate, signed by the CA, PEM.
    public let serverCertificatePEM: String
    /// The server (leaf) certificate, DER.
    public let serverCertificateDER: [UInt8]
    /// The server certificate's private key, PKCS#8 PEM ("-----BEGIN PRIVATE KEY-----").
    public let serverPrivateKeyPEM: String
    /// The server certificate's private key, PKCS#8 DER.
    public let serverPrivateKeyDER: [UInt8]

    /// How many there are (`init(_:)` takes 0 up to one less).
    public static var count: Int { fixtures.count }

    /// The CA numbered `index` (0 by default), with its server certificate.
    public init(_ index: Int = 0) throws {
        let fixture = Self.fixtures[index]
        commonName = fixture.commonName
        caPEM = fixture.caPEM
        serverCertificatePEM = fixture.serverCertificatePEM
        serverPrivateKeyPEM = fixture.serverPrivateKeyPEM
        caDER = try Self.der(fixture.caPEM)
        serverCertificateDER = try Self.der(fixture.serverCertificatePEM)
        serverPrivateKeyDER = try Self.der(fixture.serverPrivateKeyPEM)
    }

    /// Writes `caPEM` to `path` (a file a client can be pointed at, e.g. `curl --cacert`).
    public func writeCAPEM(to path: String) throws {
        try Data(caPEM.utf8).write(to: URL(fileURLWithPath: path), options: .atomic)
    }

    struct NotPEM: Error {}

    /// The bytes of a PEM block (its base64 between the BEGIN and END lines).
    static func der(_ pem: String) throws -> [UInt8] {
        let base64 = pem.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
        guard let data = Data(base64Encoded: base64) else { throw NotPEM() }
        return Array(data)
    }

    struct Fixture {
        var commonName: String
        var caPEM: String
        var serverCertificatePEM: String
        var serverPrivateKeyPEM: String
    }

    static let fixtures: [Fixture] = [
        Fixture(
            commonName: "ferry test CA 1",
            caPEM: """
-----BEGIN CERTIFICATE-----
MIIBvjCCAWSgAwIBAgIIPmYPzDPeXdUwCgYIKoZIzj0EAwIwMDEUMBIGA1UECgwL
ZmVycnkgdGVzdHMxGDAWBgNVBAMMD2ZlcnJ5IHRlc3QgQ0EgMTAgFw0yNjExMjgw
NDAyNDVaGA8yMTI2MTEwNDA0MDI0NVowMDEUMBIGA1UECgwLZmVycnkgdGVzdHMx
GDAWBgNVBAMMD2ZlcnJ5IHRlc3QgQ0EgMTBZMBMGByqGSM49AgEGCCqGSM49AwEH
A0IABJz1MuigMi7TcQ0RnW7kswpAL7DaNrR+3F1kK7IemKtw4l17njAs/KRpPWm8
kuf/AF/E2Bi584QpLsqCqIkE4wijZjBkMB8GA1UdIwQYMBaAFIfx2qrI10BC+JpQ
N/Le1WuhsKJkMBIGA1UdEwEB/wQIMAYBAf8CAQAwDgYDVR0PAQH/BAQDAgEGMB0G
A1UdDgQWBBSH8dqqyNdAQviaUDfy3tVrobCiZDAKBggqhkjOPQQDAgNIADBFAiEA
lDY47h6JuHO1xEFS+3Y4tq5nVhGeBGOabBk4JT35GBUCICAUNMt4koYv9fH+Yg9M
HyJGycii2nTtuu9frArch2qi
-----END CERTIFICATE-----
""",
            serverCertificatePEM: """
-----BEGIN CERTIFICATE-----
MIIB+DCCAZ2gAwIBAgIIJtjQCaFPE94wCgYIKoZIzj0EAwIwMDEUMBIGA1UECgwL
ZmVycnkgdGVzdHMxGDAWBgNVBAMMD2ZlcnJ5IHRlc3QgQ0EgMTAgFw0yNjExMjgw
NDAyNDVaGA8yMTI2MTEwNDA0MDI0NVowKjEUMBIGA1UECgwLZmVycnkgdGVzdHMx
EjAQBgNVBAMMCWxvY2FsaG9zdDBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABMeK
ZwHos97ILDGT7NCJ1ba7wI6JMmWoEWNgYHnqpdtn6DWy+mSIOW3P1So4JTt7O8eS
R5zU8Kx2I6m+UZMJmRujgaQwgaEwDAYDVR0TAQH/BAIwADAOBgNVHQ8BAf8EBAMC
B4AwEwYDVR0lBAwwCgYIKwYBBQUHAwEwLAYDVR0RBCUwI4IJbG9jYWxob3N0hwR/
AAABhxAAAAAAAAAAAAAAAAAAAAABMB0GA1UdDgQWBBT4Gs8xahs2tvOur43hc1m5
HbP0YTAfBgNVHSMEGDAWgBSH8dqqyNdAQviaUDfy3tVrobCiZDAKBggqhkjOPQQD
AgNJADBGAiEAkxeed7+HIaCzJCitFsRlDLpgDRyKfLRh5NOnKi8mCHMCIQCmEk3H
iOyZqBu6Ab4C38bx4T0U8J/afUc8stCjsm761A==
-----END CERTIFICATE-----
""",
            serverPrivateKeyPEM: """
-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgxbMwwn43DahYFbKw
WcspZ5s/k5Pq8nsJLJzQhZP3w4KhRANCAATHimcB6LPeyCwxk+zQidW2u8COiTJl
qBFjYGB56qXbZ+g1svpkiDltz9UqOCU7ezvHkkec1PCsdiOpvlGTCZkb
-----END PRIVATE KEY-----
"""),
        Fixture(
            commonName: "ferry test CA 2",
            caPEM: """
-----BEGIN CERTIFICATE-----
MIIBvjCCAWSgAwIBAgIIcRRgwwhV5l8wCgYIKoZIzj0EAwIwMDEUMBIGA1UECgwL
ZmVycnkgdGVzdHMxGDAWBgNVBAMMD2ZlcnJ5IHRlc3QgQ0EgMjAgFw0yNjExMjgw
NDAyNDVaGA8yMTI2MTEwNDA0MDI0NVowMDEUMBIGA1UECgwLZmVycnkgdGVzdHMx
GDAWBgNVBAMMD2ZlcnJ5IHRlc3QgQ0EgMjBZMBMGByqGSM49AgEGCCqGSM49AwEH
A0IABP5z+icJC6858D+5RUyBTcQ4W75UUDGs1fUZSUvCElMQFTOXT/G1W9TBBLfE
p6el1LROFwtS3uaR16FXlABg1+GjZjBkMB8GA1UdIwQYMBaAFOZQIgwir4wfH0DE
5T8qeTS6+jGQMBIGA1UdEwEB/wQIMAYBAf8CAQAwDgYDVR0PAQH/BAQDAgEGMB0G
A1UdDgQWBBTmUCIMIq+MHx9AxOU/Knk0uvoxkDAKBggqhkjOPQQDAgNIADBFAiEA
u3LgFNSvSgrOFAy6IS1itMI2dQmT+eQCvjWFt776uPACIHiOWZhdM4T+ZFSc51po
7m9snTMdVthQA0dqjgOziLQz
-----END CERTIFICATE-----
""",
            serverCertificatePEM: """
-----BEGIN CERTIFICATE-----
MIIB+DCCAZ2gAwIBAgIIRBlUlm7HkqwwCgYIKoZIzj0EAwIwMDEUMBIGA1UECgwL
ZmVycnkgdGVzdHMxGDAWBgNVBAMMD2ZlcnJ5IHRlc3QgQ0EgMjAgFw0yNjExMjgw
NDAyNDVaGA8yMTI2MTEwNDA0MDI0NVowKjEUMBIGA1UECgwLZmVycnkgdGVzdHMx
EjAQBgNVBAMMCWxvY2FsaG9zdDBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABEGr
H7/vqsD1MClEnJa9/J9VW7SF8TpDIc2ViPUgcNOu/k4Ycs2UNpUiGpFmadMmSSRX
vQMYYhrMa3+g8DIVfXGjgaQwgaEwDAYDVR0TAQH/BAIwADAOBgNVHQ8BAf8EBAMC
B4AwEwYDVR0lBAwwCgYIKwYBBQUHAwEwLAYDVR0RBCUwI4IJbG9jYWxob3N0hwR/
AAABhxAAAAAAAAAAAAAAAAAAAAABMB0GA1UdDgQWBBSfdNXAbBo+zCd0kk0OBcLr
a4shOTAfBgNVHSMEGDAWgBTmUCIMIq+MHx9AxOU/Knk0uvoxkDAKBggqhkjOPQQD
AgNJADBGAiEAxiO0m2Tbsc/KmKrNNCslt/J3FFjNWv1rh3cZclCg2EwCIQDv7HQx
HC48lngg+9z3YIMOLP5NVjpj1SKWfc87Bmzixw==
-----END CERTIFICATE-----
""",
            serverPrivateKeyPEM: """
-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgu9Jt1E6M0J5MEqUn
hlFftbWv8JvqM3mQ/MFL49jRrYehRANCAARBqx+/76rA9TApRJyWvfyfVVu0hfE6
QyHNlYj1IHDTrv5OGHLNlDaVIhqRZmnTJkkkV70DGGIazGt/oPAyFX1x
-----END PRIVATE KEY-----
"""),
        Fixture(
            commonName: "ferry test CA 3",
            caPEM: """
-----BEGIN CERTIFICATE-----
MIIBvTCCAWSgAwIBAgIIINP6fkLXWpYwCgYIKoZIzj0EAwIwMDEUMBIGA1UECgwL
ZmVycnkgdGVzdHMxGDAWBgNVBAMMD2ZlcnJ5IHRlc3QgQ0EgMzAgFw0yNjExMjgw
NDAyNDVaGA8yMTI2MTEwNDA0MDI0NVowMDEUMBIGA1UECgwLZmVycnkgdGVzdHMx
GDAWBgNVBAMMD2ZlcnJ5IHRlc3QgQ0EgMzBZMBMGByqGSM49AgEGCCqGSM49AwEH
A0IABAkataQrPSANj8Ag5R760LzsVk6WvIQlBMdJuLG3mkOQz/U+izXnPwS6uYc9
Sd6IAhygIp294vn4vkJi8e1ykcmjZjBkMB8GA1UdIwQYMBaAFOdsD+Ry+u4RP/7H
yrpryuuLsID4MBIGA1UdEwEB/wQIMAYBAf8CAQAwDgYDVR0PAQH/BAQDAgEGMB0G
A1UdDgQWBBTnbA/kcvruET/+x8q6a8rri7CA+DAKBggqhkjOPQQDAgNHADBEAiAM
kydIG5+8XPO5f3FKk4x+7DJokQr/xj6B0ObJz2Mn4AIgNgH8SyDzF4umkD5zlNqy
9jPqIXhR/DKpF6gKo24DFz4=
-----END CERTIFICATE-----
""",
            serverCertificatePEM: """
-----BEGIN CERTIFICATE-----
MIIB9zCCAZ2gAwIBAgIIM8G1QVaGIsIwCgYIKoZIzj0EAwIwMDEUMBIGA1UECgwL
ZmVycnkgdGVzdHMxGDAWBgNVBAMMD2ZlcnJ5IHRlc3QgQ0EgMzAgFw0yNjExMjgw
NDAyNDVaGA8yMTI2MTEwNDA0MDI0NVowKjEUMBIGA1UECgwLZmVycnkgdGVzdHMx
EjAQBgNVBAMMCWxvY2FsaG9zdDBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABFql
zlKajOIFy2dsyjVCu6zvDM0HG49tr/5e12GLUh1bBmnHE2eCoQxjrhAnMXw5jIk7
Y3UOmUUPH6mksBeXFX6jgaQwgaEwDAYDVR0TAQH/BAIwADAOBgNVHQ8BAf8EBAMC
B4AwEwYDVR0lBAwwCgYIKwYBBQUHAwEwLAYDVR0RBCUwI4IJbG9jYWxob3N0hwR/
AAABhxAAAAAAAAAAAAAAAAAAAAABMB0GA1UdDgQWBBTcmbYy/xX0PLbk03WLngWn
Eyd4BDAfBgNVHSMEGDAWgBTnbA/kcvruET/+x8q6a8rri7CA+DAKBggqhkjOPQQD
AgNIADBFAiB0rFbTcB1sHMsfo1y1ogadAoJYHhx+gHTTZxAwg0RFogIhALByIfhz
d6QgvjsbpyEmCcJPc3FJzyp2JifghPHKHnAw
-----END CERTIFICATE-----
""",
            serverPrivateKeyPEM: """
-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg1TTDk17J/bRNEyM5
edQUfjfEuGcdGyGrRPjMl695IgWhRANCAARapc5SmoziBctnbMo1Qrus7wzNBxuP
ba/+Xtdhi1IdWwZpxxNngqEMY64QJzF8OYyJO2N1DplFDx+ppLAXlxV+
-----END PRIVATE KEY-----
"""),
    ]
}
