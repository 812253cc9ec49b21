import CXML
import FerryModel
import Foundation

/// One entry of a directory listing as the server wrote it. Untrusted: TreeScope says whether it is inside the
/// tree and what it is called there.
public struct ListingEntry: Sendable, Equatable {
    /// The link, resolved against the listing's own URL.
    public var url: URL
    /// The link names a directory (its path ends in "/", or the listing says so).
    public var isDirectory: Bool
    /// Bytes, when the listing says them exactly (nginx's; most servers round: "4.8M").
    public var size: Int64?
    /// When the listing says it (to the minute in nginx's HTML, to the second in its JSON).
    public var modified: Date?
    /// Seconds `modified` is given to: 60 for a listing that writes minutes.
    public var precision: TimeInterval = 1

    public init(url: URL, isDirectory: Bool, size: Int64? = nil, modified: Date? = nil) {
        self.url = url
        self.isDirectory = isDirectory
        self.size = size
        self.modified = modified
    }
}

/// Reads the directory listings real servers write: HTML indexes (nginx autoindex, Apache mod_autoindex,
/// lighttpd, Caddy's browse, Python's http.server, rclone serve http) through libxml2's HTML parser, and
/// nginx's `autoindex_format json`. Every link is an entry; what is inside the tree is TreeScope's to say.
public enum DirectoryListing {
    /// The entries of a listing fetched from `page` (its final URL, after redirects).
    public static func entries(_ body: Data, contentType: String?, page: URL) -> [ListingEntry] {
        let type = contentType?.lowercased() ?? ""
        if type.hasPrefix(DirectoryLines.contentType) {
            return DirectoryLines.entries(body).compactMap { line in
                URL(string: encodedSegment(line.name) + (line.isDirectory ? "/" : ""), relativeTo: page)
                    .map { ListingEntry(url: $0.absoluteURL, isDirectory: line.isDirectory, size: line.size) }
            }
        }
        if type.contains("xml"), !type.contains("html") {
            return webdav(body, page: page)
        }
        if type.contains("json") || (type.isEmpty && body.first == UInt8(ascii: "[")) {
            return json(body, page: page) ?? []
        }
        return html(body, charset: charset(of: type), page: page)
    }

    // MARK: nginx's JSON

    /// `[{"name":"a b","type":"directory","mtime":"Fri, 27 Nov 2026 10:00:00 GMT"}, {"name":..., "type":"file",
    /// "size":4, ...}]`: names as they are on disk (not encoded), so each is encoded into a link here.
    static func json(_ body: Data, page: URL) -> [ListingEntry]? {
        guard let list = try? JSONSerialization.jsonObject(with: body) as? [[String: Any]] else { return nil }
        return list.compactMap { item -> ListingEntry? in
            guard let name = item["name"] as? String, !name.isEmpty else { return nil }
            let isDirectory = (item["type"] as? String) == "directory"
            guard let url = URL(string: encodedSegment(name) + (isDirectory ? "/" : ""), relativeTo: page)?.absoluteURL else { return nil }
            let size = (item["size"] as? NSNumber).map { $0.int64Value }.flatMap { $0 >= 0 ? $0 : nil }
            return ListingEntry(url: url, isDirectory: isDirectory, size: isDirectory ? nil : size,
                                modified: (item["mtime"] as? String).flatMap(HTTPDate.parse))
        }
    }

    /// A name as one path segment: everything but RFC 3986's unreserved characters percent-encoded.
    public static func encodedSegment(_ name: String) -> String {
        var out = ""
        for byte in name.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                out += "%" + String(byte, radix: 16, uppercase: true).leftPadded(to: 2)
            }
        }
        return out
    }

    // MARK: WebDAV

    /// A PROPFIND's `207 Multi-Status` (RFC 4918): one `response` per resource, the directory itself among them,
    /// each with its `href` (a path or a URL) and the properties a `200` propstat gives: `resourcetype`
    /// (`collection` for a directory), `getcontentlength`, `getlastmodified`. Elements are matched by local name
    /// (servers pick their own prefix for `DAV:`). Parsed without entities or network (no XXE).
    public static func webdav(_ body: Data, page: URL) -> [ListingEntry] {
        _ = parserReady
        let options = Int32(XML_PARSE_NONET.rawValue | XML_PARSE_NOERROR.rawValue | XML_PARSE_NOWARNING.rawValue | XML_PARSE_NOCDATA.rawValue)
        let document = body.withUnsafeBytes { raw -> xmlDocPtr? in
            guard let base = raw.baseAddress, raw.count > 0 else { return nil }
            return xmlReadMemory(base.assumingMemoryBound(to: CChar.self), Int32(clamping: raw.count), page.absoluteString, nil, options)
        }
        guard let document else { return [] }
        defer { xmlFreeDoc(document) }
        guard let root = xmlDocGetRootElement(document), localName(root) == "multistatus" else { return [] }
        var entries: [ListingEntry] = []
        for response in elements(root) where localName(response) == "response" {
            guard let href = elements(response).first(where: { localName($0) == "href" }).flatMap(text) else { continue }
            var isCollection = false, size: Int64?, modified: Date?
            for propstat in elements(response) where localName(propstat) == "propstat" {
                let status = elements(propstat).first { localName($0) == "status" }.flatMap(text)
                if let status, !status.contains(" 200") { continue }
                for prop in elements(propstat) where localName(prop) == "prop" {
                    for property in elements(prop) {
                        switch localName(property) {
                        case "resourcetype": isCollection = isCollection || elements(property).contains { localName($0) == "collection" }
                        case "getcontentlength": size = text(property).flatMap { Int64($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
                        case "getlastmodified": modified = text(property).flatMap { HTTPDate.parse($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
                        default: break
                        }
                    }
                }
            }
            var link = href.trimmingCharacters(in: .whitespacesAndNewlines)
            // A collection's href without its "/" still names a directory.
            if isCollection, !link.hasSuffix("/") { link += "/" }
            guard let url = URL(string: link, relativeTo: page)?.absoluteURL else { continue }
            entries.append(ListingEntry(url: url, isDirectory: isCollection || link.hasSuffix("/"),
                                        size: isCollection ? nil : size.flatMap { $0 >= 0 ? $0 : nil }, modified: modified))
        }
        return entries
    }

    /// An element's name without its namespace prefix; nil for any other node.
    static func localName(_ node: xmlNodePtr) -> String? {
        guard node.pointee.type == XML_ELEMENT_NODE, let name = node.pointee.name else { return nil }
        return String(cString: name)
    }

    /// The element children of `node`, in order.
    static func elements(_ node: xmlNodePtr) -> [xmlNodePtr] {
        var out: [xmlNodePtr] = []
        var child = node.pointee.children
        while let c = child {
            if c.pointee.type == XML_ELEMENT_NODE { out.append(c) }
            child = c.pointee.next
        }
        return out
    }

    /// The text inside `node`.
    static func text(_ node: xmlNodePtr) -> String? {
        guard let content = xmlNodeGetContent(node) else { return nil }
        defer { ferry_xml_free(content) }
        return String(cString: content)
    }

    // MARK: HTML

    static func charset(of contentType: String) -> String {
        guard let range = contentType.range(of: "charset=") else { return "UTF-8" }
        let value = contentType[range.upperBound...].prefix { $0 != ";" && $0 != " " }.trimmingCharacters(in: CharacterSet(charactersIn: "\"'"))
        return value.isEmpty ? "UTF-8" : value
    }

    private static let parserReady: Void = { xmlInitParser() }()

    /// Every `<a href>` of the page, resolved against its `<base href>` or the page's URL. A link's size and
    /// time are read where nginx writes them: the text after the link (`27-Nov-2026 10:00    4`).
    static func html(_ body: Data, charset: String, page: URL) -> [ListingEntry] {
        _ = parserReady
        let options = Int32(HTML_PARSE_RECOVER.rawValue | HTML_PARSE_NOERROR.rawValue | HTML_PARSE_NOWARNING.rawValue
                            | HTML_PARSE_NONET.rawValue | HTML_PARSE_COMPACT.rawValue)
        let document = body.withUnsafeBytes { raw -> htmlDocPtr? in
            guard let base = raw.baseAddress, raw.count > 0 else { return nil }
            return htmlReadMemory(base.assumingMemoryBound(to: CChar.self), Int32(clamping: raw.count), page.absoluteString, charset, options)
        }
        guard let document else { return [] }
        defer { xmlFreeDoc(document) }
        var base = page
        var entries: [ListingEntry] = []
        // Depth first, without recursion (a hostile page may nest deeply).
        var stack: [xmlNodePtr] = []
        if let root = xmlDocGetRootElement(document) { stack.append(root) }
        while let node = stack.popLast() {
            if let tag = element(node) {
                if tag == "base", let href = attribute(node, "href"), let url = URL(string: href, relativeTo: page)?.absoluteURL {
                    base = url
                } else if tag == "a", let href = attribute(node, "href"),
                          let url = URL(string: href.trimmingCharacters(in: .whitespacesAndNewlines), relativeTo: base)?.absoluteURL {
                    let isDirectory = url.path(percentEncoded: true).hasSuffix("/")
                    var entry = ListingEntry(url: url, isDirectory: isDirectory)
                    if let (modified, size) = nginxFigures(after: node) {
                        (entry.modified, entry.precision) = (modified, 60)
                        if !isDirectory { entry.size = size }
                    } else if let (modified, size) = rowFigures(of: node) {
                        entry.modified = modified
                        if !isDirectory { entry.size = size }
                    }
                    entries.append(entry)
                }
            }
            // Children pushed last first, so that links come out in the page's order.
            var child = node.pointee.last
            while let c = child {
                stack.append(c)
                child = c.pointee.prev
            }
        }
        return entries
    }

    /// An element's tag in lower case; nil for any other node.
    static func element(_ node: xmlNodePtr) -> String? {
        guard node.pointee.type == XML_ELEMENT_NODE, let name = node.pointee.name else { return nil }
        return String(cString: name).lowercased()
    }

    static func attribute(_ node: xmlNodePtr, _ name: String) -> String? {
        guard let value = xmlGetProp(node, name) else { return nil }
        defer { ferry_xml_free(value) }
        return String(cString: value)
    }

    /// nginx's autoindex writes each entry as `<a href="x">x</a>` then `  27-Nov-2026 10:00   4` (or `-` for a
    /// directory): a date in GMT to the minute and the exact size in bytes (`autoindex_exact_size on`, nginx's
    /// default). Anything else after a link says nothing here.
    static func nginxFigures(after node: xmlNodePtr) -> (Date, Int64?)? {
        guard let next = node.pointee.next, next.pointee.type == XML_TEXT_NODE, let content = xmlNodeGetContent(next) else { return nil }
        defer { ferry_xml_free(content) }
        // ASCII blanks (nginx ends lines with CR LF), byte by byte: a listing of 2,000 entries spent a tenth of its
        // walk asking each Character whether it is whitespace.
        let words = String(cString: content).utf8.split { $0 == 0x20 || $0 == 0x09 || $0 == 0x0D || $0 == 0x0A }.map { Substring($0) }
        guard words.count == 3, let date = nginxDate(words[0], words[1]) else { return nil }
        if words[2] == "-" { return (date, nil) }
        guard words[2].allSatisfy(\.isASCIIDigitCharacter), let size = Int64(words[2]) else { return nil }
        return (date, size)
    }

    /// Caddy's browse and rclone's `serve http` write each entry as a table row: the exact size in a cell's
    /// `data-order`, the time in a `<time datetime>` (`2026-11-27T10:00:00Z`, `2026-11-27 10:00:00 +0000 UTC`).
    /// Apache's and lighttpd's rows give rounded sizes (`4.8M`) and local times: nothing is read from those.
    static func rowFigures(of link: xmlNodePtr) -> (Date?, Int64?)? {
        var row = link.pointee.parent
        for _ in 0..<3 where row.map({ element($0) != "tr" }) ?? false { row = row?.pointee.parent }
        guard let row, element(row) == "tr" else { return nil }
        var size: Int64?, modified: Date?
        var cell = row.pointee.children
        while let c = cell {
            if c.pointee.type == XML_ELEMENT_NODE {
                if let order = attribute(c, "data-order"), let bytes = Int64(order), bytes >= 0 { size = bytes }
                var inner = c.pointee.children
                while let i = inner {
                    if element(i) == "time",
                       let stamp = attribute(i, "datetime") { modified = isoDate(stamp) }
                    inner = i.pointee.next
                }
            }
            cell = c.pointee.next
        }
        return size == nil && modified == nil ? nil : (modified, size)
    }

    /// `YYYY-MM-DD[T ]HH:MM:SS` then `Z` or ` +hhmm` (and anything after it), as Caddy and rclone write it.
    static func isoDate(_ text: String) -> Date? {
        let t = Array(text.trimmingCharacters(in: .whitespaces).utf8)
        func number(_ from: Int, _ count: Int) -> Int? {
            guard from + count <= t.count else { return nil }
            var n = 0
            for b in t[from..<(from + count)] {
                guard (48...57).contains(b) else { return nil }
                n = n * 10 + Int(b - 48)
            }
            return n
        }
        guard t.count >= 19, let y = number(0, 4), let mo = number(5, 2), let d = number(8, 2), let h = number(11, 2),
              let mi = number(14, 2), let sec = number(17, 2) else { return nil }
        var offset = 0
        var rest = t[19...].drop { $0 == UInt8(ascii: " ") }
        if rest.first == UInt8(ascii: ".") { rest = rest.dropFirst().drop { (48...57).contains($0) }.drop { $0 == UInt8(ascii: " ") } }
        if let sign = rest.first, sign == UInt8(ascii: "+") || sign == UInt8(ascii: "-") {
            let digits = Array(rest.dropFirst().filter { $0 != UInt8(ascii: ":") }.prefix(4))
            guard digits.count == 4, digits.allSatisfy({ (48...57).contains($0) }) else { return nil }
            let minutes = Int(digits[0] - 48) * 600 + Int(digits[1] - 48) * 60 + Int(digits[2] - 48) * 10 + Int(digits[3] - 48)
            offset = (sign == UInt8(ascii: "+") ? 1 : -1) * minutes * 60
        } else if rest.first != UInt8(ascii: "Z") {
            return nil
        }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "GMT")!
        return calendar.date(from: DateComponents(year: y, month: mo, day: d, hour: h, minute: mi, second: sec))?
            .addingTimeInterval(TimeInterval(-offset))
    }

    static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// `27-Nov-2026` `10:00`, GMT.
    static func nginxDate(_ day: Substring, _ time: Substring) -> Date? {
        let d = day.split(separator: "-"), t = time.split(separator: ":")
        guard d.count == 3, t.count == 2, let dd = Int(d[0]), let yyyy = Int(d[2]), let hh = Int(t[0]), let mm = Int(t[1]),
              let month = months.firstIndex(of: String(d[1])) else { return nil }
        return HTTPDate.utc(year: yyyy, month: month + 1, day: dd, hour: hh, minute: mm)
    }
}

private extension Character {
    var isASCIIDigitCharacter: Bool { isASCII && isNumber }
}

private extension String {
    func leftPadded(to width: Int) -> String { count >= width ? self : String(repeating: "0", count: width - count) + self }
}
