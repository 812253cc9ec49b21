@testable import FerryEngine
import FerryModel
import Foundation
import Testing

/// Listings as real servers wrote them (Tests/Fixtures/listings: nginx 1.22.1 HTML and JSON, Apache 2.4, lighttpd
/// 1.4.69, Caddy 2.6.2, Python 3.11's http.server, rclone 1.60's serve http; WebDAV PROPFIND answers of rclone
/// serve webdav, WsgiDAV 4.4 and Apache's mod_dav; README.md there says how), read and kept to the tree.
@Suite struct DirectoryListingTests {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/listings")
    static let servers = ["nginx-html", "nginx-json", "apache", "lighttpd", "caddy", "python", "rclone",
                          "webdav-rclone", "webdav-wsgidav", "webdav-apache"]
    static let base = URL(string: "http://127.0.0.1:8080")!
    static let longName = "long-" + String(repeating: "n", count: 111) + ".txt"

    struct Page: Decodable {
        var path: String
        var file: String
        var contentType: String
        var status: Int
    }

    static func pages(_ server: String) throws -> [Page] {
        let data = try Data(contentsOf: fixtures.appendingPathComponent("\(server)/manifest.json"))
        return try JSONDecoder().decode([Page].self, from: data)
    }

    /// The entries of one captured page that are inside the tree, as "relative path" ("/" after a directory).
    static func inside(_ server: String, _ path: String) throws -> [String: ListingEntry] {
        let page = try #require(try pages(server).first { $0.path == path })
        let body = try Data(contentsOf: fixtures.appendingPathComponent("\(server)/\(page.file)"))
        let url = URL(string: path, relativeTo: base)!.absoluteURL
        let scope = TreeScope(root: URL(string: "/pub/", relativeTo: base)!.absoluteURL)!
        let directory = try #require(TreeScope.segments(of: url)).dropFirst().map { FileNaming.safeBaseName($0)! }
        var found: [String: ListingEntry] = [:]
        for (place, entry) in scope.children(of: directory, in: DirectoryListing.entries(body, contentType: page.contentType, page: url)) {
            found[place.relative + (place.isDirectory ? "/" : "")] = entry
        }
        return found
    }

    @Test(arguments: servers) func theStartDirectorysEntriesAreFoundAndNothingOutside(_ server: String) throws {
        let root = try Self.inside(server, "/pub/")
        #expect(Set(root.keys) == ["a b/", "deep/", "sizes/", "50% off.txt", "x&y#z?.txt", "top.txt", Self.longName],
                "\(server): \(root.keys.sorted())")
        for (name, entry) in root {
            #expect(entry.isDirectory == name.hasSuffix("/"), "\(server): \(name)")
        }
    }

    @Test(arguments: servers) func blanksNonASCIIAndTheSymlinkedDirectory(_ server: String) throws {
        let inner = try Self.inside(server, "/pub/a%20b/")
        // rclone does not follow a symlink without -L, nor do WebDAV servers list one (rclone, wsgidav, mod_dav_fs).
        var expected: Set<String> = ["a b/inner file.txt", "a b/café/"]
        if !["rclone", "webdav-rclone", "webdav-wsgidav", "webdav-apache"].contains(server) { expected.insert("a b/back/") }
        #expect(Set(inner.keys) == expected, "\(server): \(inner.keys.sorted())")
        let cafe = try Self.inside(server, "/pub/a%20b/caf%C3%A9/")
        #expect(Set(cafe.keys) == ["a b/café/naïve résumé.txt"], "\(server): \(cafe.keys.sorted())")
    }

    /// Exact sizes and times where the listing gives them (nginx's HTML and JSON, Caddy's `data-order` and
    /// `<time>`, rclone's); none read from rounded ones (Apache's `4.8M`, lighttpd's `4.7M`) or where there are
    /// none (Python's).
    @Test(arguments: servers) func sizesAndTimesOnlyWhereTheyAreExact(_ server: String) throws {
        let sizes = try Self.inside(server, "/pub/sizes/")
        #expect(Set(sizes.keys) == ["sizes/zero.bin", "sizes/k.bin", "sizes/big.bin"], "\(server)")
        let exact = ["nginx-html", "nginx-json", "caddy", "rclone", "webdav-rclone", "webdav-wsgidav", "webdav-apache"].contains(server)
        #expect(sizes["sizes/zero.bin"]?.size == (exact ? 0 : nil), "\(server)")
        #expect(sizes["sizes/k.bin"]?.size == (exact ? 1000 : nil), "\(server)")
        #expect(sizes["sizes/big.bin"]?.size == (exact ? 5_000_000 : nil), "\(server)")
        let stamp = Date(timeIntervalSince1970: 1_795_773_600) // 2026-11-27 10:00:00 UTC
        #expect(sizes["sizes/big.bin"]?.modified == (exact ? stamp : nil), "\(server): \(String(describing: sizes["sizes/big.bin"]?.modified))")
    }

    @Test(arguments: servers) func anEmptyDirectoryHasNoEntries(_ server: String) throws {
        #expect(try Self.inside(server, "/pub/deep/l1/empty/").isEmpty)
    }

    /// A multistatus may be hostile too: no entities are expanded, nothing is fetched.
    @Test func aWebDAVAnswerExpandsNoEntity() {
        let body = """
            <?xml version="1.0"?><!DOCTYPE m [<!ENTITY x SYSTEM "file:///etc/passwd">]>
            <D:multistatus xmlns:D="DAV:"><D:response><D:href>/pub/&x;</D:href></D:response>
            <D:response><D:href>/pub/ok.txt</D:href><D:propstat><D:prop><D:getcontentlength>3</D:getcontentlength></D:prop>
            <D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response></D:multistatus>
            """
        let entries = DirectoryListing.entries(Data(body.utf8), contentType: "application/xml", page: URL(string: "http://h/pub/")!)
        #expect(!entries.contains { $0.url.absoluteString.contains("root") })
        #expect(entries.last?.url.absoluteString == "http://h/pub/ok.txt" && entries.last?.size == 3)
    }

    // MARK: The scope

    static let scope = TreeScope(root: URL(string: "http://h:8080/pub/")!)!

    @Test func whatIsOutsideTheTreeIsNotFollowed() {
        for outside in ["http://h:8080/", "http://h:8080/pub/", "http://h:8080/public/x", "http://other:8080/pub/x",
                        "https://h:8080/pub/x", "http://h:8081/pub/x", "http://h:8080/pub/?C=N;O=D", "http://h:8080/pub/x?sort=size",
                        "http://h:8080/pub/x#top", "http://h:8080/pub/%2E%2E/etc/passwd", "http://h:8080/pub/a%2Fb",
                        "http://h:8080/pub/a%00b", "http://h:8080/pub/%2E/x", "ftp://h:8080/pub/x"] {
            #expect(Self.scope.place(of: URL(string: outside)!) == nil, "\(outside)")
        }
    }

    @Test func insideTheTreeNamesAreDecodedAndMadeSafe() throws {
        let place = try #require(Self.scope.place(of: URL(string: "http://H:8080/pub/a%20b/caf%c3%a9/na%C3%AFve.txt")!))
        #expect(place.path == ["a b", "café", "naïve.txt"])
        #expect(!place.isDirectory)
        #expect(Self.scope.place(of: URL(string: "http://h:8080/pub/deep/")!)?.isDirectory == true)
        // A name that would be hidden or read as an option is made safe as a single file's is.
        #expect(Self.scope.place(of: URL(string: "http://h:8080/pub/-rf/.hidden")!)?.path == ["rf", "hidden"])
        // Dot segments are resolved before the scope sees the link: one that climbs out is outside.
        let climbed = URL(string: "../../etc/passwd", relativeTo: URL(string: "http://h:8080/pub/a/")!)!.absoluteURL
        #expect(Self.scope.place(of: climbed) == nil)
        // The default port is the same port.
        #expect(TreeScope(root: URL(string: "http://h/pub")!)!.place(of: URL(string: "http://h:80/pub/x")!)?.path == ["x"])
    }

    @Test func globsMatchANameAnywhereOrAWholePath() {
        let filter = TreeFilter(include: ["*.txt", "sizes/*"], exclude: ["l3*"])
        #expect(filter.wants("top.txt"))
        #expect(filter.wants("a b/café/naïve résumé.txt"))
        #expect(filter.wants("sizes/big.bin"))
        #expect(!filter.wants("sizes/more/big.bin"))
        #expect(!filter.wants("deep/l1/l2/l3.txt"))
        #expect(!filter.wants("other.bin"))
        #expect(TreeFilter().wants("anything/at/all"))
    }

    @Test func hostilePagesGiveWhatLinksTheyHaveAndNoMore() {
        let page = URL(string: "http://h/pub/")!
        #expect(DirectoryListing.entries(Data(), contentType: "text/html", page: page).isEmpty)
        #expect(DirectoryListing.entries(Data("[{\"name\": 3}, {\"name\":\"../x\",\"type\":\"file\"}]".utf8), contentType: "application/json", page: page)
            .compactMap { Self.scope.place(of: $0.url) }.isEmpty)
        let nested = String(repeating: "<div>", count: 200) + "<a href=\"x\">x</a>"
        #expect(DirectoryListing.entries(Data(nested.utf8), contentType: "text/html", page: page).map(\.url.lastPathComponent) == ["x"])
        // Past libxml2's depth limit (256) the parser stops: what it read stands, and nothing crashes.
        let deep = String(repeating: "<div>", count: 100_000) + "<a href=\"x\">x</a>"
        #expect(DirectoryListing.entries(Data(deep.utf8), contentType: "text/html", page: page).count <= 1)
        let base = "<html><head><base href=\"http://evil/\"></head><body><a href=\"y\">y</a></body></html>"
        #expect(DirectoryListing.entries(Data(base.utf8), contentType: "text/html", page: page).map(\.url.host) == ["evil"])
    }
}
