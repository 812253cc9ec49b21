import Foundation
import Testing
@testable import FerryModel

/// Issue 24: a failed or retrying row says why in a few words; the words come from the failure's message as an
/// item keeps it (TransferFailure.message), the detail view shows the message whole.
@Suite struct FailureReasonTests {
    @Test(arguments: [
        (TransferFailure.http(status: 404, reason: "Not Found", retryAfter: nil).message, "HTTP 404"),
        (TransferFailure.http(status: 503, reason: "", retryAfter: 5).message, "HTTP 503"),
        (TransferFailure.transport(code: -1004, message: "cannot connect to 127.0.0.1:1 (connection refused)").message, "refused"),
        (TransferFailure.transport(code: -1004, message: "cannot connect to h:80 (no route to host)").message, "no connection"),
        (TransferFailure.transport(code: -1003, message: "cannot resolve host name nope.invalid (DNS): x").message, "no such host"),
        (TransferFailure.transport(code: -1001, message: "timed out: nothing from h for 30 s").message, "timed out"),
        (TransferFailure.transport(code: -1005, message: "the connection to h was lost: x").message, "connection lost"),
        (TransferFailure.transport(code: -1202, message: "TLS: the certificate of h is not trusted").message, "TLS untrusted"),
        (TransferFailure.transport(code: -1202, message: "TLS: the certificate of h is for another name (x)").message, "TLS wrong name"),
        (TransferFailure.transport(code: -1004, message: "cannot connect to the proxy 127.0.0.1:3128 (connection refused)").message, "no proxy"),
        (TransferFailure.transport(code: -1004, message: "the proxy p:3128 refused the tunnel to h: CONNECT tunnel failed, response 502").message, "proxy refused"),
        (TransferFailure.transport(code: -1200, message: "TLS: the secure connection to h failed").message, "TLS failed"),
        (TransferFailure.transport(code: -1011, message: "h sent something that is not HTTP").message, "bad response"),
        (TransferFailure.transport(code: -7, message: "odd").message, "odd"),
        // As ferry kept them before the code left the message.
        ("cannot connect to 127.0.0.1:1 (connection refused) (error -1004)", "refused"),
        ("something new (error -1001)", "timed out"),
        ("something else (error -7)", "error -7"),
        (TransferFailure.local("cannot write /d/f.part: No space left on device").message, "disk full"),
        (TransferFailure.local("cannot create /ro/f.part: Read-only file system").message, "read-only"),
        (TransferFailure.local("cannot open /x/f: Permission denied").message, "no permission"),
        (TransferFailure.integrity("SHA-256 mismatch: expected aa, got bb").message, "bad checksum"),
        ("cancelled (HTTP 500 Internal Server Error)", "cancelled"),
        ("short words", "short words"),
        ("a message that goes on for far too long for a row", "a message that goes…"),
        ("HTTP nonsense", "HTTP nonsense"),
    ])
    func aFailureInAFewWords(_ message: String, _ words: String) {
        #expect(TransferFailure.short(message) == words)
    }

    /// Issue 24, bug 12: a transport failure's message is words, without the URLError code at its end.
    @Test func aTransportFailureIsSaidWithoutItsCode() {
        #expect(TransferFailure.transport(code: -1004, message: "cannot connect to h:1 (connection refused)").message
                == "cannot connect to h:1 (connection refused)")
    }
}
