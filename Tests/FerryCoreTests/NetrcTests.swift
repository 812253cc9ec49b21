import Foundation
import Testing
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import FerryCore
@testable import FerryEngine
@testable import FerryModel
@testable import FerryStorage
@testable import FerryTransport

@Suite struct NetrcTests {
    @Test func entriesDefaultQuotesCommentsAndMacros() throws {
        let text = """
            # a comment line
            machine api.example.com login alice password "two words \\" quoted"
            machine files.example.com
              login bob
              account ignored
              password b0b
            macdef init
            cd /pub
            machine inside.macro login no password no

            machine API.EXAMPLE.COM login second password ignored
            default login anon password guest
            """
        let netrc = try Netrc.parse(text, file: "n")
        #expect(netrc.login(for: "api.example.com", orDefault: false) == .init(login: "alice", password: "two words \" quoted"))
        #expect(netrc.login(for: "Files.Example.com", orDefault: false) == .init(login: "bob", password: "b0b"))
        // A macro's lines are skipped up to the blank line: the machine inside it is none.
        #expect(netrc.login(for: "inside.macro", orDefault: false) == nil)
        #expect(netrc.login(for: "elsewhere.net", orDefault: false) == nil)
        #expect(netrc.login(for: "elsewhere.net", orDefault: true) == .init(login: "anon", password: "guest"))
        #expect(netrc.login(for: "api.example.com", orDefault: true)?.login == "alice")
    }

    /// Files other programs write: their own words are skipped, keywords in capitals are keywords, a macro's
    /// body (with '#' lines and stray quotes) is not read as entries.
    @Test func wordsOfOtherProgramsAndMacroBodiesAreSkipped() throws {
        let text = """
            MACHINE a.test port 2121 LOGIN alice PASSWORD pw
            machine m.test login mm password mp macdef upload
            # a comment inside the macro
            put "file with a quote
            machine evil.test login x password y

            machine b.test login bob password pw2
            """
        let netrc = try Netrc.parse(text, file: "n")
        #expect(netrc.login(for: "a.test", orDefault: false) == .init(login: "alice", password: "pw"))
        #expect(netrc.login(for: "m.test", orDefault: false) == .init(login: "mm", password: "mp"))
        #expect(netrc.login(for: "evil.test", orDefault: false) == nil)
        #expect(netrc.login(for: "b.test", orDefault: false) == .init(login: "bob", password: "pw2"))
    }

    @Test func oneLineFilesAsCurlWritesThem() throws {
        let netrc = try Netrc.parse("machine h login u password p machine g login v password q\n", file: "n")
        #expect(netrc.login(for: "h", orDefault: false)?.password == "p")
        #expect(netrc.login(for: "g", orDefault: false)?.login == "v")
    }

    @Test func errorsNameTheFileAndLineButNoSecret() {
        func message(_ text: String) -> String {
            do { _ = try Netrc.parse(text, file: "/home/u/.netrc"); return "no error" } catch { return error.description }
        }
        #expect(message("machine h login u\npassword") == "/home/u/.netrc:2: 'password' needs a value after it")
        #expect(message("machine h login u password \"SECRET") == "/home/u/.netrc:1: a quoted word is not closed")
        #expect(message("machine h login u password").hasPrefix("/home/u/.netrc:1: 'password' needs a value"))
        #expect(message("login u password SECRET") == "/home/u/.netrc:1: 'login' outside a machine entry")
        for text in ["machine h login u password \"SECRET", "machine h login u password \"SECRET\nmachine g"] {
            #expect(!message(text).contains("SECRET"))
        }
    }

    @Test func aFileOthersCanReadGivesAWarning() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ferry-netrc-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/netrc"
        try "machine h login u password p\n".write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, 0o600)
        #expect(try Netrc.check(path: path).warning == nil)
        chmod(path, 0o644)
        #expect(try Netrc.check(path: path).warning?.contains("can be read by other users") == true)
        #expect(throws: UsageError.self) { try Netrc.check(path: dir + "/missing") }
        #expect(Netrc.defaultPath(environment: ["NETRC": "/x/n"]) == "/x/n")
        #expect(Netrc.defaultPath(environment: ["HOME": dir]) == nil)
        try "".write(toFile: dir + "/.netrc", atomically: true, encoding: .utf8)
        #expect(Netrc.defaultPath(environment: ["HOME": dir]) == dir + "/.netrc")
    }

    /// The rule: the netrc login goes to the host the user named (its entry, else `default`) unless the request
    /// carries its own; after a redirect to another host only that host's own entry, never `default`.
    @Test func theLoginGoesToItsHostOnly() throws {
        let netrc = try Netrc.parse("machine a.test login alice password pw\nmachine b.test login bob password pw2\ndefault login anon password guest\n", file: "n")
        let credentials = HostCredentials(hostHeaders: [], netrc: netrc)
        func request(_ url: String, headers: [HTTPHeader] = []) -> URLRequest {
            RequestHeaders.request(for: TransferSpec(download: URL(string: url)!, directory: "/tmp", headers: headers),
                                   method: "GET", userAgent: "t", timeout: 5, credentials: credentials)
        }
        func basic(_ pair: String) -> String { "Basic " + Data(pair.utf8).base64EncodedString() }
        #expect(request("http://a.test/f").value(forHTTPHeaderField: "Authorization") == basic("alice:pw"))
        #expect(request("http://c.test/f").value(forHTTPHeaderField: "Authorization") == basic("anon:guest"))
        #expect(request("http://a.test/f", headers: [HTTPHeader(name: "Authorization", value: "Bearer mine")])
            .value(forHTTPHeaderField: "Authorization") == "Bearer mine")
        #expect(request("http://u:p@a.test/f").value(forHTTPHeaderField: "Authorization") == nil)

        let first = request("http://a.test/f")
        func hop(from current: URLRequest, to url: String) -> URLRequest {
            var next = current
            next.url = URL(string: url)
            return RequestHeaders.forRedirect(next, previous: current.url, credentials: credentials)
        }
        #expect(hop(from: first, to: "http://a.test/g").value(forHTTPHeaderField: "Authorization") == basic("alice:pw"))
        #expect(hop(from: first, to: "http://c.test/g").value(forHTTPHeaderField: "Authorization") == nil)
        // A to B and back to A: B's login goes to B only, A gets its own again.
        let atB = hop(from: first, to: "http://b.test/g")
        #expect(atB.value(forHTTPHeaderField: "Authorization") == basic("bob:pw2"))
        #expect(hop(from: atB, to: "http://a.test/h").value(forHTTPHeaderField: "Authorization") == basic("alice:pw"))
        // Another port or scheme on the same host is another origin: what the request carried is dropped.
        let mine = request("https://c.test/f", headers: [HTTPHeader(name: "Authorization", value: "Bearer mine")])
        #expect(hop(from: mine, to: "https://c.test:443/g").value(forHTTPHeaderField: "Authorization") == "Bearer mine")
        #expect(hop(from: mine, to: "http://c.test/g").value(forHTTPHeaderField: "Authorization") == nil)
        #expect(hop(from: mine, to: "https://c.test:8443/g").value(forHTTPHeaderField: "Authorization") == nil)
    }
}
