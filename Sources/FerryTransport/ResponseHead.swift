import FerryModel
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A response's status line and headers, as libcurl hands them over one line at a time.
struct ResponseHead {
    private(set) var status = 0
    private(set) var version = "HTTP/1.1"
    private(set) var fields: [(name: String, value: String)] = []
    /// The blank line after a final (non-1xx) response's headers has arrived.
    private(set) var complete = false
    /// An interim (1xx) answer whose headers are complete, until `takeInterim` hands it on.
    private var interim: (status: Int, version: String, fields: [(name: String, value: String)])?

    mutating func add(line raw: String) {
        let line = HTTPText.trimmed(Substring(raw))
        if line.isEmpty {
            // An interim answer (100 Continue, 104 Upload Resumption Supported) is followed by the real one.
            if status >= 200 {
                complete = true
            } else {
                if status >= 100 { interim = (status, version, fields) }
                fields = []
            }
            return
        }
        if line.hasPrefix("HTTP/") {
            let parts = line.split(separator: " ", maxSplits: 2)
            version = parts.first.map(String.init) ?? version
            status = parts.count > 1 ? Int(parts[1]) ?? 0 : 0
            fields = []
            complete = false
            return
        }
        if let first = raw.utf8.first, first == 0x20 || first == 0x09, !fields.isEmpty {
            // An obsolete folded line continues the previous header.
            fields[fields.count - 1].value += " " + line
            return
        }
        guard let colon = line.utf8.firstIndex(of: UInt8(ascii: ":")) else { return }
        let name = HTTPText.trimmed(line[..<colon])
        guard !name.isEmpty else { return }
        fields.append((String(name), String(HTTPText.trimmed(line[line.utf8.index(after: colon)...]))))
    }

    /// The interim answer that has just ended, as a response (once).
    mutating func takeInterim(url: URL) -> HTTPURLResponse? {
        guard let answer = interim else { return nil }
        interim = nil
        return HTTPURLResponse(url: url, statusCode: answer.status, httpVersion: answer.version,
                               headerFields: Self.joined(answer.fields))
    }

    func value(_ name: String) -> String? {
        fields.first { Self.sameName($0.name, name) }?.value
    }

    /// Header names compare without regard to ASCII case.
    static func sameName(_ a: String, _ b: String) -> Bool {
        a.utf8.count == b.utf8.count && zip(a.utf8, b.utf8).allSatisfy { x, y in
            x == y || (x | 0x20 == y | 0x20 && (x | 0x20) >= 0x61 && (x | 0x20) <= 0x7A)
        }
    }

    func httpResponse(url: URL) -> HTTPURLResponse? {
        HTTPURLResponse(url: url, statusCode: status, httpVersion: version, headerFields: Self.joined(fields))
    }

    private static func joined(_ fields: [(name: String, value: String)]) -> [String: String] {
        var headers: [String: String] = [:]
        // The first spelling of a name is kept; repeated fields are joined with ", ".
        var spelling: [String: String] = [:]
        for (name, value) in fields {
            let key = name.lowercased()
            if let existing = spelling[key] {
                headers[existing]! += ", " + value
            } else {
                spelling[key] = name
                headers[name] = value
            }
        }
        return headers
    }
}
