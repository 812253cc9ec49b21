import Crypto
import Foundation
import SwiftASN1
import X509

/// A throwaway certificate authority made at run time: a self-signed CA certificate and a server
/// certificate signed by it for `localhost`, 127.0.0.1 and ::1 (P-256 keys, valid from an hour ago
/// for a week). Give it to `TestHTTPServer(tls:)`, and `caPEM` (or the file from `writeCAPEM(to:)`)
/// to the client that should trust the server.
///
/// Every value made is unrelated to every other (fresh keys, a distinct name): a second
/// `TestCertificateAuthority()` is an untrusted CA for a client that trusts only the first.
public struct TestCertificateAuthority: Sendable {
    /// The CA's subject common name (with a random suffix unless one was given).
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

    /// Makes a new CA and a server certificate signed by it.
    /// - Parameter commonName: the CA's name; default "ferry test CA" with a random suffix.
    public init(commonName: String? = nil) throws {
        let now = Date()
        let notBefore = now.addingTimeInterval(-3600)  // a client clock a little behind still accepts it
        let notAfter = now.addingTimeInterval(7 * 24 * 3600)
        let caName = commonName ?? "ferry test CA \(UUID().uuidString.prefix(8))"

        let caKey = P256.Signing.PrivateKey()
        let caPublicKey = Certificate.PublicKey(caKey.publicKey)
        let caSubject = try DistinguishedName {
            OrganizationName("ferry tests")
            CommonName(caName)
        }
        let caKeyID = SubjectKeyIdentifier(hash: caPublicKey)
        let ca = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: caPublicKey,
            notValidBefore: notBefore,
            notValidAfter: notAfter,
            issuer: caSubject,
            subject: caSubject,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
                caKeyID
            },
            issuerPrivateKey: Certificate.PrivateKey(caKey)
        )

        let serverKey = P256.Signing.PrivateKey()
        let serverPublicKey = Certificate.PublicKey(serverKey.publicKey)
        let serverSubject = try DistinguishedName {
            OrganizationName("ferry tests")
            CommonName("localhost")
        }
        let loopbackV4: [UInt8] = [127, 0, 0, 1]
        let loopbackV6: [UInt8] = Array(repeating: 0, count: 15) + [1]
        let names: [GeneralName] = [
            .dnsName("localhost"),
            .ipAddress(ASN1OctetString(contentBytes: loopbackV4[...])),
            .ipAddress(ASN1OctetString(contentBytes: loopbackV6[...])),
        ]
        let server = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: serverPublicKey,
            notValidBefore: notBefore,
            notValidAfter: notAfter,
            issuer: caSubject,
            subject: serverSubject,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                try ExtendedKeyUsage([.serverAuth])
                SubjectAlternativeNames(names)
                SubjectKeyIdentifier(hash: serverPublicKey)
                AuthorityKeyIdentifier(keyIdentifier: caKeyID.keyIdentifier)
            },
            issuerPrivateKey: Certificate.PrivateKey(caKey)
        )

        self.commonName = caName
        self.caPEM = try ca.serializeAsPEM().pemString
        self.caDER = try derBytes(ca)
        self.serverCertificatePEM = try server.serializeAsPEM().pemString
        self.serverCertificateDER = try derBytes(server)
        self.serverPrivateKeyPEM = serverKey.pemRepresentation
        self.serverPrivateKeyDER = Array(serverKey.derRepresentation)
    }

    /// Writes `caPEM` to `path` (a file a client can be pointed at, e.g. `curl --cacert`).
    public func writeCAPEM(to path: String) throws {
        try Data(caPEM.utf8).write(to: URL(fileURLWithPath: path), options: .atomic)
    }
}

private func derBytes(_ certificate: Certificate) throws -> [UInt8] {
    var serializer = DER.Serializer()
    try serializer.serialize(certificate)
    return serializer.serializedBytes
}
