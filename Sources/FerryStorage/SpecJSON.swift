import FerryModel
import Foundation

/// A download's spec read from the JSON the store keeps (`transfer.spec`) without JSONDecoder, for the shape the
/// store writes for downloads: the synthesized Codable's keys of TransferSpec, MirrorOf and HTTPHeader, in any
/// order. Anything else (an upload, a key or a value of another shape, broken text) is nil: the caller decodes it
/// with JSONDecoder, which stays the definition of the format (SpecJSONTests holds the two to the same result).
///
/// Why: an item beyond the engine's loaded ones is read back from the store before it starts, its spec decoded
/// each time; a tree's specs differ file by file, so no two rows share one. JSONDecoder took about 60 µs a row,
/// 3-6 % of a 10,000- or 30,000-file tree's CPU (docs/trees.md, session 38); this takes a few.
enum SpecJSON {
    private static let specURLText = SQLiteQueueStore.specURL.absoluteString

    /// The spec a row keeps: read here when it is a download's of the usual shape, by JSONDecoder otherwise.
    static func decode(_ text: String) throws -> TransferSpec {
        if let spec = decodeDownload(text) { return spec }
        return try JSONDecoder().decode(TransferSpec.self, from: Data(text.utf8))
    }

    /// A download's spec as JSON, written here (a tree's specs differ file by file: each is written); nil for an
    /// upload, or a time JSON cannot hold (JSONEncoder's then, and its error). Both readers read it back as the
    /// spec it was (SpecJSONTests).
    static func encodeDownload(_ spec: TransferSpec) -> String? {
        guard spec.direction == .download, spec.upload == nil else { return nil }
        var out = "{\"direction\":\"download\",\"url\":"
        out.reserveCapacity(160 + spec.directory.utf8.count + (spec.fileName?.utf8.count ?? 0))
        out += JSONText.string(spec.url.absoluteString)
        out += ",\"headers\":["
        for (index, header) in spec.headers.enumerated() {
            out += index == 0 ? "{\"name\":" : ",{\"name\":"
            out += JSONText.string(header.name)
            out += ",\"value\":"
            out += JSONText.string(header.value)
            out += "}"
        }
        out += "],\"directory\":"
        out += JSONText.string(spec.directory)
        func member(_ key: String, _ text: String?) {
            guard let text else { return }
            out += ",\"\(key)\":"
            out += JSONText.string(text)
        }
        member("fileName", spec.fileName)
        member("sha256", spec.sha256)
        if let segments = spec.segments { out += ",\"segments\":\(segments)" }
        if let rateLimit = spec.rateLimit { out += ",\"rateLimit\":\(rateLimit)" }
        member("netrcFile", spec.netrcFile)
        member("sshAgent", spec.sshAgent)
        if let mirror = spec.mirror {
            var members: [String] = []
            if let size = mirror.size { members.append("\"size\":\(size)") }
            if let modified = mirror.modified {
                let seconds = modified.timeIntervalSinceReferenceDate
                guard seconds.isFinite else { return nil }
                members.append("\"modified\":\(seconds)")
            }
            if let any = mirror.replacesAnyFile { members.append("\"replacesAnyFile\":\(any)") }
            out += ",\"mirror\":{" + members.joined(separator: ",") + "}"
        }
        out += "}"
        return out
    }

    /// The spec in `text`, or nil when it is not a download spec of the shape above.
    static func decodeDownload(_ text: String) -> TransferSpec? {
        var text = text
        return text.withUTF8 { bytes -> TransferSpec? in
            var reader = Reader(bytes: bytes)
            guard let spec = reader.spec(), reader.atEnd() else { return nil }
            return spec
        }
    }

    private struct Reader {
        let bytes: UnsafeBufferPointer<UInt8>
        var at = 0

        init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

        mutating func atEnd() -> Bool {
            skipSpace()
            return at == bytes.count
        }

        mutating func skipSpace() {
            while at < bytes.count, bytes[at] == 0x20 || bytes[at] == 0x0A || bytes[at] == 0x0D || bytes[at] == 0x09 { at += 1 }
        }

        mutating func take(_ byte: UInt8) -> Bool {
            skipSpace()
            guard at < bytes.count, bytes[at] == byte else { return false }
            at += 1
            return true
        }

        /// `null` (an optional written as such: the synthesized decoder takes it as nil).
        mutating func null() -> Bool {
            skipSpace()
            guard at + 4 <= bytes.count, bytes[at] == 0x6E, bytes[at + 1] == 0x75, bytes[at + 2] == 0x6C, bytes[at + 3] == 0x6C
            else { return false }
            at += 4
            return true
        }

        /// The members of an object, each handed to `member` with its key; false when the text is not an object
        /// or `member` refuses one.
        mutating func object(_ member: (inout Reader, String) -> Bool) -> Bool {
            guard take(0x7B) else { return false }
            if take(0x7D) { return true }
            while true {
                guard let key = string(), take(0x3A), member(&self, key) else { return false }
                if take(0x2C) { continue }
                return take(0x7D)
            }
        }

        mutating func string() -> String? {
            guard take(0x22) else { return nil }
            let start = at
            // Most strings have no escape: their bytes as they are.
            while at < bytes.count, bytes[at] != 0x22, bytes[at] != 0x5C {
                guard bytes[at] >= 0x20 else { return nil }
                at += 1
            }
            guard at < bytes.count else { return nil }
            if bytes[at] == 0x22 {
                defer { at += 1 }
                return String(validating: UnsafeBufferPointer(rebasing: bytes[start..<at]), as: UTF8.self)
            }
            var scalars = Array(bytes[start..<at])
            while at < bytes.count {
                let byte = bytes[at]
                at += 1
                switch byte {
                case 0x22:
                    return String(validating: scalars, as: UTF8.self)
                case 0x5C:
                    guard at < bytes.count else { return nil }
                    let escape = bytes[at]
                    at += 1
                    switch escape {
                    case 0x22, 0x5C, 0x2F: scalars.append(escape)
                    case 0x62: scalars.append(0x08)
                    case 0x66: scalars.append(0x0C)
                    case 0x6E: scalars.append(0x0A)
                    case 0x72: scalars.append(0x0D)
                    case 0x74: scalars.append(0x09)
                    case 0x75:
                        guard var code = hex4() else { return nil }
                        if (0xD800..<0xDC00).contains(code) {
                            // A surrogate pair: the low half must follow.
                            guard at + 2 <= bytes.count, bytes[at] == 0x5C, bytes[at + 1] == 0x75 else { return nil }
                            at += 2
                            guard let low = hex4(), (0xDC00..<0xE000).contains(low) else { return nil }
                            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                        }
                        guard let scalar = Unicode.Scalar(code) else { return nil }
                        scalars.append(contentsOf: UTF8.encode(scalar)!)
                    default:
                        return nil
                    }
                default:
                    guard byte >= 0x20 else { return nil }
                    scalars.append(byte)
                }
            }
            return nil
        }

        private mutating func hex4() -> UInt32? {
            guard at + 4 <= bytes.count else { return nil }
            var value: UInt32 = 0
            for _ in 0..<4 {
                let byte = bytes[at]
                let digit: UInt32
                switch byte {
                case 0x30...0x39: digit = UInt32(byte - 0x30)
                case 0x41...0x46: digit = UInt32(byte - 0x41 + 10)
                case 0x61...0x66: digit = UInt32(byte - 0x61 + 10)
                default: return nil
                }
                value = value << 4 | digit
                at += 1
            }
            return value
        }

        /// The bytes of a number, as JSON spells one: `-`? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?.
        private mutating func numberText() -> String? {
            skipSpace()
            let start = at
            func digits() -> Int {
                let from = at
                while at < bytes.count, (0x30...0x39).contains(bytes[at]) { at += 1 }
                return at - from
            }
            if at < bytes.count, bytes[at] == 0x2D { at += 1 }
            let integerStart = at
            guard digits() > 0, bytes[integerStart] != 0x30 || at - integerStart == 1 else { return nil }
            if at < bytes.count, bytes[at] == 0x2E {
                at += 1
                guard digits() > 0 else { return nil }
            }
            if at < bytes.count, bytes[at] == 0x65 || bytes[at] == 0x45 {
                at += 1
                if at < bytes.count, bytes[at] == 0x2B || bytes[at] == 0x2D { at += 1 }
                guard digits() > 0 else { return nil }
            }
            return String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<at]), as: UTF8.self)
        }

        /// An integer written as one (a fraction or an exponent is left to JSONDecoder).
        mutating func integer() -> Int64? {
            guard let text = numberText() else { return nil }
            return Int64(text)
        }

        mutating func double() -> Double? {
            guard let text = numberText(), let value = Double(text), value.isFinite else { return nil }
            return value
        }

        mutating func bool() -> Bool? {
            skipSpace()
            if at + 4 <= bytes.count, bytes[at] == 0x74, bytes[at + 1] == 0x72, bytes[at + 2] == 0x75, bytes[at + 3] == 0x65 {
                at += 4
                return true
            }
            if at + 5 <= bytes.count, bytes[at] == 0x66, bytes[at + 1] == 0x61, bytes[at + 2] == 0x6C, bytes[at + 3] == 0x73,
               bytes[at + 4] == 0x65 {
                at += 5
                return false
            }
            return nil
        }

        /// A member's value into `target`: `null` is nil where the member is optional; false when the value is not
        /// of the member's shape.
        mutating func read<T>(_ value: (inout Reader) -> T?, into target: inout T?, optional: Bool = true) -> Bool {
            if optional, null() {
                target = nil
                return true
            }
            guard let found = value(&self) else { return false }
            target = found
            return true
        }

        mutating func headers() -> [HTTPHeader]? {
            guard take(0x5B) else { return nil }
            var headers: [HTTPHeader] = []
            if take(0x5D) { return headers }
            while true {
                var name: String?
                var value: String?
                guard object({ reader, key in
                    switch key {
                    case "name": return reader.read({ $0.string() }, into: &name, optional: false)
                    case "value": return reader.read({ $0.string() }, into: &value, optional: false)
                    default: return false
                    }
                }), let name, let value else { return nil }
                headers.append(HTTPHeader(name: name, value: value))
                if take(0x2C) { continue }
                return take(0x5D) ? headers : nil
            }
        }

        mutating func mirror() -> TransferSpec.MirrorOf? {
            var mirror = TransferSpec.MirrorOf(size: nil, modified: nil)
            guard object({ reader, key in
                switch key {
                case "size": return reader.read({ $0.integer() }, into: &mirror.size)
                case "replacesAnyFile": return reader.read({ $0.bool() }, into: &mirror.replacesAnyFile)
                case "modified":
                    var seconds: Double?
                    guard reader.read({ $0.double() }, into: &seconds) else { return false }
                    mirror.modified = seconds.map(Date.init(timeIntervalSinceReferenceDate:))
                    return true
                default: return false
                }
            }) else { return nil }
            return mirror
        }

        mutating func spec() -> TransferSpec? {
            var direction: String?
            var url: URL?
            var headers: [HTTPHeader]?
            var directory: String?
            var fileName: String?
            var sha256: String?
            var segments: Int64?
            var rateLimit: Int64?
            var netrcFile: String?
            var sshAgent: String?
            var mirror: TransferSpec.MirrorOf?
            guard object({ reader, key in
                switch key {
                case "direction": return reader.read({ $0.string() }, into: &direction, optional: false)
                case "url":
                    // The stand-in every row written since the `url` column holds the URL has: not parsed again.
                    return reader.read({ reader in
                        reader.string().flatMap { $0 == SpecJSON.specURLText ? SQLiteQueueStore.specURL : URL(string: $0) }
                    }, into: &url, optional: false)
                case "headers": return reader.read({ $0.headers() }, into: &headers, optional: false)
                case "directory": return reader.read({ $0.string() }, into: &directory, optional: false)
                case "fileName": return reader.read({ $0.string() }, into: &fileName)
                case "sha256": return reader.read({ $0.string() }, into: &sha256)
                case "segments": return reader.read({ $0.integer() }, into: &segments)
                case "rateLimit": return reader.read({ $0.integer() }, into: &rateLimit)
                case "netrcFile": return reader.read({ $0.string() }, into: &netrcFile)
                case "sshAgent": return reader.read({ $0.string() }, into: &sshAgent)
                case "mirror": return reader.read({ $0.mirror() }, into: &mirror)
                default: return false  // an upload's, or a key this does not know: JSONDecoder's
                }
            }) else { return nil }
            guard direction == Direction.download.rawValue, let url, let headers, let directory else { return nil }
            var spec = TransferSpec(download: url, directory: directory, headers: headers)
            spec.fileName = fileName
            // As decoded, not as the initializer would make it (it lowercases).
            spec.sha256 = sha256
            if let segments {
                guard let count = Int(exactly: segments) else { return nil }
                spec.segments = count
            }
            spec.rateLimit = rateLimit
            spec.netrcFile = netrcFile
            spec.sshAgent = sshAgent
            spec.mirror = mirror
            return spec
        }
    }
}
