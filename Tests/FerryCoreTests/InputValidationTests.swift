import Foundation
import Testing
@testable import FerryCore
@testable import FerryEngine
@testable import FerryModel
@testable import FerryStorage
@testable import FerryTransport

@Suite struct InputValidationTests {
    /// Issue 41: what `ferry list` prints in its state column is what `--state` takes (`retrying` was refused),
    /// and the states' own words too.
    @Test(arguments: TransferState.allCases)
    func everyWordAListShowsSelectsItsState(_ state: TransferState) throws {
        #expect(try Selection.states(state.label) == [state])
        #expect(try Selection.states(state.rawValue.uppercased()) == [state])
        #expect(TransferState.names.contains(state.label))
    }

    @Test func anUnknownStateNamesTheWords() {
        #expect(throws: UsageError.self) { try Selection.states("finished") }
        do {
            _ = try Selection.states("retrying,finished")
            Issue.record("'finished' taken as a state")
        } catch {
            #expect(error.description.contains("'finished'") && error.description.contains("retrying (waiting)")
                    && error.description.contains("done (completed)"), "\(error.description)")
        }
    }

    @Test func acceptsHTTPAndHTTPS() throws {
        #expect(try InputValidation.url("http://example.com/a").host == "example.com")
        #expect(try InputValidation.url(" HTTPS://example.com/ ").scheme?.lowercased() == "https")
    }

    @Test(arguments: ["", "not a url", "gopher://example.com/x", "file:///etc/passwd", "http://", "example.com/x", "http:///x"])
    func rejectsEverythingElse(_ text: String) {
        #expect(throws: UsageError.self) { try InputValidation.url(text) }
    }

    /// A port out of range was taken and failed at the request ("malformed URL", the item left in the queue,
    /// failed); a blank inside a URL was sent as %20 (a comment after a URL in a list fetched "3.bin%20" and
    /// saved "3.bin "). Both are refused before anything is queued.
    @Test func aPortOutOfRangeAndABlankInsideAreRefused() throws {
        for text in ["http://h:99999/x", "http://h:0/x", "http://h/a b", "http://h/3.bin # comment", "http://h/a\tb"] {
            #expect(throws: UsageError.self, "\(text)") { try InputValidation.url(text) }
        }
        #expect(try InputValidation.url("http://h:65535/x").port == 65535)
        do {
            _ = try InputValidation.urlList(contents: "http://h/1\nhttp://h/3.bin # comment\n", path: "l")
            Issue.record("a URL with a comment after it must be refused")
        } catch {
            #expect(error.description.hasPrefix("l:2: a blank in URL 'http://h/3.bin # comment'"), "\(error.description)")
        }
        do {
            _ = try InputValidation.url("http://h:99999/x")
        } catch {
            #expect(error.description == "port 99999 in 'http://h:99999/x' is not a port (1 to 65535)")
        }
    }

    @Test func urlListNamesTheBadLine() throws {
        let list = "# mirrors\nhttp://a/x\n\n   \nhttps://b/y\ngopher://c/z\n"
        do {
            _ = try InputValidation.urlList(contents: list, path: "list.txt")
            Issue.record("a bad line must be rejected")
        } catch {
            #expect(error.description.hasPrefix("list.txt:6: "))
        }
        #expect(try InputValidation.urlList(contents: "http://a/x\n# c\nhttps://b/y", path: "l").count == 2)
    }

    /// Issue 41: a list with three bad lines names all three in one run (it named the first, and the next run the
    /// second); past `badLinesNamed`, how many more. Nothing is queued.
    @Test func aListNamesEveryBadLine() throws {
        let list = "http://a/1\nexample.com/2\nhttp://a/3\ngopher://c/4\nhttp://h:99999/5\nhttp://a/6\n"
        do {
            _ = try InputValidation.urlList(contents: list, path: "list.txt")
            Issue.record("bad lines must be refused")
        } catch {
            #expect(error.description == """
                3 bad lines in list.txt (nothing was queued):
                  list.txt:2: no scheme in 'example.com/2': write http://example.com/2 (or https://)
                  list.txt:4: unsupported scheme 'gopher' in 'gopher://c/4': http, https, sftp, scp, ftp and ftps
                  list.txt:5: port 99999 in 'http://h:99999/5' is not a port (1 to 65535)
                """, "\(error.description)")
        }
        let many = (1...25).map { "bad \($0)" }.joined(separator: "\n")
        do {
            _ = try InputValidation.urlList(contents: many, path: "l")
            Issue.record("bad lines must be refused")
        } catch {
            let lines = error.description.split(separator: "\n")
            #expect(lines.count == 1 + InputValidation.badLinesNamed + 1, "\(error.description)")
            #expect(lines.last == "  and \(25 - InputValidation.badLinesNamed) more")
        }
    }

    /// A URL written without its scheme (curl and wget take `host/file` as http) is refused with the URL it most
    /// likely meant; what looks like no host is refused as before.
    @Test func aURLWithoutItsSchemeIsRefusedWithTheOneMeant() {
        for (text, meant) in [("example.com/file.iso", "http://example.com/file.iso"), ("localhost:8080/x", "http://localhost:8080/x"),
                              ("mirror.example.org", "http://mirror.example.org")] {
            do {
                _ = try InputValidation.url(text)
                Issue.record("\(text) taken")
            } catch {
                #expect(error.description == "no scheme in '\(text)': write \(meant) (or https://)")
            }
        }
        #expect(InputValidation.withoutScheme("not a url") == nil)
        #expect(InputValidation.withoutScheme("notes") == nil)
        #expect(InputValidation.withoutScheme("ftp://example.com/x") == nil)
    }

    @Test func aListWithWindowsLineEndsReadsAsItsLines() throws {
        let urls = try InputValidation.urlList(contents: "http://a/1\r\n# c\r\n\r\nhttp://a/2\r\n", path: "l")
        #expect(urls.map(\.absoluteString) == ["http://a/1", "http://a/2"])
        // Unicode's blanks around a line, and a line of them alone.
        let spaced = try InputValidation.urlList(contents: "\u{00A0}http://a/3\u{2003}\n\u{00A0}\u{3000}\n\u{00A0}# note\n", path: "l")
        #expect(spaced.map(\.absoluteString) == ["http://a/3"])
    }

    /// A long list is read in runs on every core: still in order, and its bad lines are named in order.
    @Test func aLongListKeepsItsOrderAndNamesItsBadLinesInOrder() throws {
        var lines = (1...90_000).map { "http://h/\($0)" }
        #expect(try InputValidation.urlList(contents: lines.joined(separator: "\n"), path: "l").map(\.absoluteString) == lines)
        lines[70_000] = "gopher://h/x"
        lines[30_000] = "not a url"
        lines[89_999] = "gopher://h/y"
        do {
            _ = try InputValidation.urlList(contents: lines.joined(separator: "\n"), path: "long.txt")
            Issue.record("a bad line must be rejected")
        } catch {
            let named = error.description.split(separator: "\n").dropFirst().map { $0.split(separator: ":").prefix(2).joined(separator: ":") }
            #expect(named == ["  long.txt:30001", "  long.txt:70001", "  long.txt:90000"], "\(error.description)")
        }
    }

    @Test func sha256NeedsSixtyFourHexDigits() throws {
        #expect(try InputValidation.sha256(String(repeating: "AB", count: 32)) == String(repeating: "ab", count: 32))
        #expect(throws: UsageError.self) { try InputValidation.sha256("abc") }
        #expect(throws: UsageError.self) { try InputValidation.sha256(String(repeating: "g", count: 64)) }
    }

    @Test func headersCannotInjectLines() throws {
        #expect(try InputValidation.header("X-Token: a b").value == "a b")
        #expect(throws: UsageError.self) { try InputValidation.header("X-Token: a\r\nEvil: 1") }
        #expect(throws: UsageError.self) { try InputValidation.header("Bad Name: v") }
        #expect(throws: UsageError.self) { try InputValidation.header("novalue") }
    }

    @Test func directoryIsCreatedOrRefused() throws {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("ferry-iv-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: base) }
        let made = try InputValidation.writableDirectory("sub/dir", relativeTo: base)
        #expect(made == base + "/sub/dir")
        _ = FileManager.default.createFile(atPath: base + "/file", contents: Data())
        #expect(throws: UsageError.self) { try InputValidation.writableDirectory(base + "/file", relativeTo: "/") }
    }
}
