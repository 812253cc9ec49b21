import Foundation
import Testing
@testable import FerryCore
@testable import FerryEngine
@testable import FerryModel
@testable import FerryStorage
@testable import FerryTransport

@Suite struct TerminalSafeTests {
    let r = "\u{FFFD}"

    /// Issue 24, bug 6: a server's error page becomes one short clean line (the CRLFs of a 405 page became pairs
    /// of U+FFFD, and the page was printed whole).
    @Test func anErrorPageBecomesOneShortCleanLine() {
        let page = "<html>\r\n<head><title>405 Not Allowed</title>\r\n<style>body { color: red }</style></head>\r\n"
            + "<body>\r\n<center><h1>405 Not Allowed</h1></center>\r\n<hr><center>nginx/1.22.1</center>\r\n"
            + "<script>alert(1)</script></body>\r\n</html>\r\n"
        #expect(TerminalSafe.excerpt(of: Data(page.utf8)) == "405 Not Allowed 405 Not Allowed nginx/1.22.1")
        // Controls are blanks here: the escape goes, its text stays inert.
        #expect(TerminalSafe.excerpt(of: Data("no \u{1B}[31mway &amp; &lt;b&gt;\n\n  here".utf8)) == "no [31mway & <b> here")
        let long = String(repeating: "word ", count: 100)
        let cut = TerminalSafe.excerpt(of: Data(long.utf8), limit: 22)
        #expect(cut == "word word word word…")
        #expect(TerminalSafe.excerpt(of: Data(String(repeating: "x", count: 300).utf8), limit: 10) == String(repeating: "x", count: 9) + "…")
        #expect(TerminalSafe.excerpt(of: Data("\r\n\t ".utf8)).isEmpty)
    }

    @Test func plainTextUnchanged() {
        for s in ["hello world", "数据下载 — 完成", "emoji 😀👨‍👩‍👧‍👦 ok", "ümlaut ñ é", "", "100% [=====>    ] 1.5 MiB/s", "مرحبا", "e\u{0301}"] {
            #expect(TerminalSafe.sanitize(s) == s)
            #expect(TerminalSafe.sanitize(s, allowNewlines: true) == s)
        }
    }

    @Test func escapeSequences() {
        #expect(TerminalSafe.sanitize("\u{1B}]0;title\u{07}") == "\(r)]0;title\(r)")
        #expect(TerminalSafe.sanitize("\u{1B}[2J") == "\(r)[2J")
        #expect(TerminalSafe.sanitize("a\u{1B}[31mred\u{1B}[0m") == "a\(r)[31mred\(r)[0m")
        #expect(!TerminalSafe.sanitize("\u{1B}]8;;http://evil\u{1B}\\click\u{1B}]8;;\u{1B}\\").unicodeScalars.contains("\u{1B}"))
    }

    @Test func c1Controls() {
        #expect(TerminalSafe.sanitize("\u{9B}2J") == "\(r)2J")
        #expect(TerminalSafe.sanitize("\u{9D}0;x\u{9C}") == "\(r)0;x\(r)")
        #expect(TerminalSafe.sanitize("\u{80}\u{9F}") == "\(r)\(r)")
        #expect(TerminalSafe.sanitize("\u{A0}") == "\u{A0}")  // NBSP is not a control
    }

    @Test func nulDelAndOtherC0() {
        #expect(TerminalSafe.sanitize("a\u{0}b") == "a\(r)b")
        #expect(TerminalSafe.sanitize("a\u{7F}b") == "a\(r)b")
        #expect(TerminalSafe.sanitize("\u{08}\u{0B}\u{0C}\u{1F}") == String(repeating: r, count: 4))
    }

    @Test func bidiAndFormatControls() {
        #expect(TerminalSafe.sanitize("abc\u{202E}fdp.exe") == "abc\(r)fdp.exe")
        for v: UInt32 in [0x061C, 0x200E, 0x200F, 0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2066, 0x2067, 0x2068, 0x2069] {
            let s = String(Character(Unicode.Scalar(v)!))
            #expect(TerminalSafe.sanitize("x\(s)y") == "x\(r)y")
        }
        // neighbours of the ranges are left alone
        #expect(TerminalSafe.sanitize("\u{200D}\u{2065}\u{206A}\u{2029}") == "\u{200D}\u{2065}\u{206A}\u{2029}")
    }

    @Test func tabsBecomeSpaces() {
        #expect(TerminalSafe.sanitize("a\tb") == "a b")
        #expect(TerminalSafe.sanitize("a\tb", allowNewlines: true) == "a b")
    }

    @Test func newlines() {
        #expect(TerminalSafe.sanitize("a\nb") == "a\(r)b")
        #expect(TerminalSafe.sanitize("a\r\nb") == "a\(r)\(r)b")
        #expect(TerminalSafe.sanitize("a\nb", allowNewlines: true) == "a\nb")
        #expect(TerminalSafe.sanitize("a\r\nb\r\n", allowNewlines: true) == "a\nb\n")
        #expect(TerminalSafe.sanitize("a\rb", allowNewlines: true) == "a\(r)b")
        #expect(TerminalSafe.sanitize("a\r", allowNewlines: true) == "a\(r)")
        #expect(TerminalSafe.sanitize("a\r\r\nb", allowNewlines: true) == "a\(r)\nb")
        #expect(TerminalSafe.sanitize("\n\n", allowNewlines: true) == "\n\n")
    }

    @Test func bytes() {
        #expect(TerminalSafe.sanitize(bytes: Array("plain 数".utf8)) == "plain 数")
        #expect(TerminalSafe.sanitize(bytes: [0x61, 0xFF, 0x62]) == "a\(r)b")
        #expect(TerminalSafe.sanitize(bytes: [0xE6, 0x95]) == r)  // truncated sequence
        #expect(TerminalSafe.sanitize(bytes: [0xC0, 0xAF]) .unicodeScalars.allSatisfy { $0 == "\u{FFFD}" })  // overlong "/"
        #expect(TerminalSafe.sanitize(bytes: [0x1B, 0x5B, 0x32, 0x4A]) == "\(r)[2J")
        #expect(TerminalSafe.sanitize(bytes: [0xC2, 0x9B]) == r)  // C1 CSI encoded in UTF-8
        #expect(TerminalSafe.sanitize(bytes: [0x61, 0x0D, 0x0A, 0x62], allowNewlines: true) == "a\nb")
        #expect(TerminalSafe.sanitize(bytes: [UInt8]()) == "")
        #expect(TerminalSafe.sanitize(bytes: Data([0x68, 0x69])) == "hi")
    }

    @Test func redactedURL() {
        #expect(TerminalSafe.redactedURL(URL(string: "http://u:p@h/x")!) == "http://h/x")
        #expect(TerminalSafe.redactedURL(URL(string: "https://user@example.com:8443/a?b=c#d")!) == "https://example.com:8443/a?b=c#d")
        #expect(TerminalSafe.redactedURL(URL(string: "http://h/x")!) == "http://h/x")
        #expect(TerminalSafe.redactedURL(URL(string: "http://h/x?mail=a@b")!) == "http://h/x?mail=a@b")
        #expect(TerminalSafe.redactedURL(URL(string: "ftp://a%40b:p%3Aw@h")!) == "ftp://h")
        #expect(TerminalSafe.redactedURL(URL(string: "http://u:p@h")!) == "http://h")
        #expect(TerminalSafe.redactedURL(URL(string: "http://u:p@h#frag@x")!) == "http://h#frag@x")
        #expect(TerminalSafe.redactedURL(URL(string: "mailto:someone@example.com")!) == "mailto:someone@example.com")
    }

    @Test func redactedURLRelativeToBase() {
        let base = URL(string: "http://u:secret@h/dir/")!
        let url = URL(string: "file.bin", relativeTo: base)!
        #expect(TerminalSafe.redactedURL(url) == "http://h/dir/file.bin")
    }
}
