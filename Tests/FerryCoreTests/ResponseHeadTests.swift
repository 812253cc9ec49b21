import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import FerryTransport
import FerryModel
import Testing

/// The response head as libcurl hands it over, a line at a time (parsed byte by byte, without Foundation).
struct ResponseHeadTests {
    func head(_ lines: [String]) -> ResponseHead {
        var head = ResponseHead()
        for line in lines { head.add(line: line) }
        return head
    }

    @Test func statusFieldsAndTheBlankLine() throws {
        let h = head(["HTTP/1.1 100 Continue\r\n", "\r\n", "HTTP/2 206 \r\n", "content-length:  12 \r\n",
                      "X-Folded: a\r\n", " \t b  \r\n", "Set-Cookie: x=1\r\n", "set-cookie: y=2\r\n", ":bad\r\n",
                      "no colon\r\n", "\r\n"])
        #expect(h.complete)
        #expect(h.status == 206)
        #expect(h.version == "HTTP/2")
        #expect(h.value("Content-Length") == "12")
        #expect(h.value("x-folded") == "a b")
        let response = try #require(h.httpResponse(url: URL(string: "http://h/x")!))
        #expect(response.statusCode == 206)
        #expect(response.value(forHTTPHeaderField: "Set-Cookie") == "x=1, y=2", "repeated fields are joined, first spelling kept")
        #expect(h.fields.count == 4, "a line without a name or a colon is left out")
    }

    @Test(arguments: [("Content-Type", "content-type", true), ("ETag", "ETAG", true), ("ETag", "ETa", false),
                      ("a[", "A{", false), ("é", "É", false), ("X-1", "x-1", true)])
    func namesCompareWithoutASCIICase(_ a: String, _ b: String, _ same: Bool) {
        #expect(ResponseHead.sameName(a, b) == same)
    }

    @Test func trimmingKeepsTheMiddle() {
        #expect(HTTPText.trimmed(" \t a b \r\n") == "a b")
        #expect(HTTPText.trimmed(" \r\n").isEmpty)
        #expect(HTTPText.trimmed("数 ") == "数")
    }
}
