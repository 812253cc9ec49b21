import Foundation
import Testing
@testable import FerryModel

/// Issue 24, issue 40: a failed or retrying row says why in a few words; the words come from the failure's kind,
/// set where the failure is made, never from its message (which the detail view shows whole).
@Suite struct FailureReasonTests {
    @Test(arguments: [
        (TransferFailure.http(status: 404, reason: "Not Found", retryAfter: nil), "HTTP 404"),
        (TransferFailure.http(status: 503, reason: "", retryAfter: 5), "HTTP 503"),
        (TransferFailure.transport(code: -1004, kind: .refused, message: "anything"), "refused"),
        (TransferFailure.transport(code: -1004, kind: .noConnection, message: "anything"), "no connection"),
        (TransferFailure.transport(code: -1003, kind: .noSuchHost, message: "anything"), "no such host"),
        (TransferFailure.transport(code: -1202, kind: .tlsWrongName, message: "anything"), "TLS wrong name"),
        (TransferFailure.transport(code: -1004, kind: .proxyUnreachable, message: "anything"), "no proxy"),
        (TransferFailure.local(.diskFull, "anything"), "disk full"),
        (TransferFailure.local(.readOnly, "anything"), "read-only"),
        (TransferFailure.integrity(.checksum, "anything"), "bad checksum"),
        (TransferFailure.integrity(.fileChanged, "anything"), "file changed"),
        (TransferFailure.protocolViolation("anything"), "protocol error"),
        (TransferFailure.transport(code: -7, kind: .other, message: "odd"), "odd"),
        (TransferFailure.transport(code: -7, kind: .other, message: "a message that goes on for far too long for a row"), "a message that goes…"),
    ])
    func aFailureInAFewWordsFromItsKind(_ failure: TransferFailure, _ words: String) {
        #expect(failure.cause.words(message: failure.message) == words)
    }

    /// A local error's kind comes from its errno, and its words say the system's reason.
    @Test func aLocalErrorIsKindedByItsErrno() {
        #expect(TransferFailure.local("cannot write /d/f.part", errno: ENOSPC).cause.kind == .diskFull)
        #expect(TransferFailure.local("cannot write /d/f.part", errno: EDQUOT).cause.kind == .diskFull)
        #expect(TransferFailure.local("cannot create /ro/f.part", errno: EROFS).cause.kind == .readOnly)
        #expect(TransferFailure.local("cannot open /x/f", errno: EACCES).cause.kind == .noPermission)
        #expect(TransferFailure.local("cannot open /x/f", errno: EIO).cause.kind == .other)
        #expect(TransferFailure.local("cannot open /x/f", errno: EACCES).message == "cannot open /x/f: Permission denied")
    }

    /// Rows kept by a ferry from before kinds were stored have their message only: read from its words, for them.
    @Test(arguments: [
        ("HTTP 404 Not Found", "HTTP 404"),
        ("cannot connect to 127.0.0.1:1 (connection refused)", "refused"),
        ("cannot connect to h:80 (no route to host)", "no connection"),
        ("cannot resolve host name nope.invalid (DNS): x", "no such host"),
        ("timed out: nothing from h for 30 s", "timed out"),
        ("the connection to h was lost: x", "connection lost"),
        ("TLS: the certificate of h is not trusted", "TLS untrusted"),
        ("TLS: the certificate of h is for another name (x)", "TLS wrong name"),
        ("cannot connect to the proxy 127.0.0.1:3128 (connection refused)", "no proxy"),
        ("the proxy p:3128 refused the tunnel to h: CONNECT tunnel failed, response 502", "proxy refused"),
        ("TLS: the secure connection to h failed", "TLS failed"),
        ("h sent something that is not HTTP", "bad response"),
        ("cannot connect to 127.0.0.1:1 (connection refused) (error -1004)", "refused"),
        ("something new (error -1001)", "timed out"),
        ("cannot write /d/f.part: No space left on device", "disk full"),
        ("cannot create /ro/f.part: Read-only file system", "read-only"),
        ("cannot open /x/f: Permission denied", "no permission"),
        ("SHA-256 mismatch: expected aa, got bb", "bad checksum"),
        ("cancelled (HTTP 500 Internal Server Error)", "cancelled"),
        ("short words", "short words"),
        ("HTTP nonsense", "HTTP nonsense"),
    ])
    func aStoredMessageFromBeforeKinds(_ message: String, _ words: String) {
        #expect(ItemFailure(message: message, cause: nil)?.cause.words(message: message) == words)
    }

    /// A stored kind wins over the message's words: a message that reads like another kind changes nothing.
    @Test func aStoredKindIsReadAsItIs() {
        let failure = ItemFailure(message: "HTTP 404 Not Found", cause: FailureCause(.diskFull))
        #expect(failure?.cause.kind == .diskFull)
    }

    /// The kind's token round-trips as the store and the wire keep it; one from a newer ferry is not guessed.
    @Test func aCauseRoundTripsAsItsToken() throws {
        for kind in FailureKind.allCases {
            let cause = FailureCause(kind, status: kind == .http ? 418 : nil)
            #expect(FailureCause(token: cause.token) == cause)
            let data = try JSONEncoder().encode(cause)
            #expect(try JSONDecoder().decode(FailureCause.self, from: data) == cause)
        }
        #expect(FailureCause(token: "http:503") == FailureCause(.http, status: 503))
        #expect(FailureCause(token: "something-new") == nil)
    }

    /// Issue 24, bug 12: a transport failure's message is words, without the URLError code at its end.
    @Test func aTransportFailureIsSaidWithoutItsCode() {
        #expect(TransferFailure.transport(code: -1004, kind: .refused, message: "cannot connect to h:1 (connection refused)").message
                == "cannot connect to h:1 (connection refused)")
    }
}
