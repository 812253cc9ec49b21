import Foundation

/// SFTP version 3 (draft-ietf-secsh-filexfer-02, what OpenSSH's sftp-server speaks), as far as ferry uses it:
/// the requests it sends and the replies it reads. A value type with no I/O: SFTPConnection frames and sends them.
enum SFTPPacket {
    enum Kind: UInt8 {
        case initialize = 1, version = 2, open = 3, close = 4, read = 5, write = 6, lstat = 7, fstat = 8
        case opendir = 11, readdir = 12, mkdir = 14, realpath = 16, stat = 17, rename = 18
        case status = 101, handle = 102, data = 103, name = 104, attrs = 105
        case extended = 200, extendedReply = 201
    }

    /// `SSH_FXF_*`: how a file is opened.
    struct OpenFlags: OptionSet {
        let rawValue: UInt32
        static let read = OpenFlags(rawValue: 0x01)
        static let write = OpenFlags(rawValue: 0x02)
        static let create = OpenFlags(rawValue: 0x08)
        static let truncate = OpenFlags(rawValue: 0x10)
    }

    /// `SSH_FX_*`: a status reply's code.
    enum Status: UInt32 {
        case ok = 0, eof = 1, noSuchFile = 2, permissionDenied = 3, failure = 4, badMessage = 5
        case noConnection = 6, connectionLost = 7, unsupported = 8
    }

    /// A file's attributes, as far as the server said them.
    struct Attributes: Equatable {
        var size: Int64?
        var permissions: UInt32?
        var mtime: Int64?

        var isDirectory: Bool { permissions.map { $0 & 0o170000 == 0o040000 } ?? false }
    }

    /// What the server answered a request with.
    enum Reply {
        case status(Status?, code: UInt32, message: String)
        case handle(Data)
        case data(Data)
        case name([(filename: String, longname: String, attributes: Attributes)])
        case attributes(Attributes)
        case extended(Data)
    }

    // MARK: Writing requests

    /// A request: its length, its kind, its id, then `fields` (what `Writer` appended).
    static func request(_ kind: Kind, id: UInt32, _ fields: (inout Writer) -> Void = { _ in }) -> Data {
        var writer = Writer()
        writer.uint32(id)
        fields(&writer)
        return frame(kind, writer.bytes)
    }

    /// The first packet (it has no id): the version ferry speaks.
    static var hello: Data {
        var writer = Writer()
        writer.uint32(3)
        return frame(.initialize, writer.bytes)
    }

    private static func frame(_ kind: Kind, _ payload: Data) -> Data {
        var packet = Data(capacity: payload.count + 5)
        Writer.append(UInt32(payload.count + 1), to: &packet)
        packet.append(kind.rawValue)
        packet.append(payload)
        return packet
    }

    /// A WRITE request's head (length, kind, id, handle, offset and the data's length): the data follows it as it
    /// is, so a large piece is not copied into one packet.
    static func writeHead(id: UInt32, handle: Data, offset: Int64, count: Int) -> Data {
        var writer = Writer()
        writer.uint32(id)
        writer.string(handle)
        writer.uint64(UInt64(offset))
        writer.uint32(UInt32(count))
        var head = Data(capacity: writer.bytes.count + 5)
        Writer.append(UInt32(writer.bytes.count + 1 + count), to: &head)
        head.append(Kind.write.rawValue)
        head.append(writer.bytes)
        return head
    }

    struct Writer {
        var bytes = Data()

        static func append(_ value: UInt32, to data: inout Data) {
            withUnsafeBytes(of: value.bigEndian) { data.append(contentsOf: $0) }
        }

        mutating func uint32(_ value: UInt32) { Self.append(value, to: &bytes) }
        mutating func uint64(_ value: UInt64) { withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) } }
        mutating func string(_ value: Data) {
            uint32(UInt32(value.count))
            bytes.append(value)
        }
        mutating func string(_ value: String) { string(Data(value.utf8)) }
        /// Attributes with nothing set (an open that creates a file, a mkdir: the server's defaults, its umask).
        mutating func noAttributes() { uint32(0) }
    }

    // MARK: Reading replies

    /// One packet off the front of `buffer` (from `start`): its kind, id (nil for VERSION) and reply, and where the
    /// next one starts; nil while it has not all arrived. Throws on a packet that makes no sense.
    static func parse(_ buffer: Data, from start: Int) throws(SFTPProtocolError) -> (kind: UInt8, id: UInt32?, reply: Reply?, next: Int)? {
        guard buffer.count - (start - buffer.startIndex) >= 4 else { return nil }
        var reader = Reader(buffer, at: start)
        let length = Int(try reader.uint32())
        guard length >= 1, length <= maxPacket else { throw SFTPProtocolError("a packet of \(length) bytes") }
        guard buffer.endIndex - reader.at >= length else { return nil }
        let end = reader.at + length
        reader.end = end
        let kind = try reader.byte()
        if kind == Kind.version.rawValue { return (kind, nil, nil, end) }
        let id = try reader.uint32()
        let reply: Reply?
        switch Kind(rawValue: kind) {
        case .status:
            let code = try reader.uint32()
            // Version 3 servers may leave out the message (draft 02 added it).
            let message = reader.left > 0 ? (try? reader.text()) ?? "" : ""
            reply = .status(Status(rawValue: code), code: code, message: message)
        case .handle: reply = .handle(try reader.string())
        case .data: reply = .data(try reader.string())
        case .attrs: reply = .attributes(try reader.attributes())
        case .name:
            let count = try reader.uint32()
            var names: [(String, String, Attributes)] = []
            names.reserveCapacity(Int(min(count, 4096)))
            for _ in 0..<count {
                let name = try reader.text()
                let long = try reader.text()
                names.append((name, long, try reader.attributes()))
            }
            reply = .name(names)
        case .extendedReply: reply = .extended(buffer.subdata(in: reader.at..<end))
        default: reply = nil
        }
        return (kind, id, reply, end)
    }

    /// The extensions a VERSION packet (`buffer[from..<to]`) names: after its length, kind and version, pairs of
    /// strings (name, data) to its end.
    static func extensions(_ buffer: Data, from: Int, to: Int) -> Set<String> {
        var reader = Reader(buffer, at: from)
        reader.end = to
        guard (try? reader.uint32()) != nil, (try? reader.byte()) != nil, (try? reader.uint32()) != nil else { return [] }
        var names: Set<String> = []
        while reader.left > 0, let name = try? reader.text(), (try? reader.string()) != nil { names.insert(name) }
        return names
    }

    /// The bytes free for an unprivileged user on the file system of a path, from the reply to OpenSSH's
    /// `statvfs@openssh.com` extension (eleven 64-bit numbers: block size, fragment size, blocks, free, available,
    /// ...); nil for a reply that is not one.
    static func spaceAvailable(_ reply: Data) -> Int64? {
        var reader = Reader(reply, at: reply.startIndex)
        var fields: [UInt64] = []
        for _ in 0..<5 {
            guard let value = try? reader.uint64() else { return nil }
            fields.append(value)
        }
        let unit = fields[1] > 0 ? fields[1] : fields[0]
        let (bytes, overflow) = fields[4].multipliedReportingOverflow(by: unit)
        return overflow || bytes > UInt64(Int64.max) ? Int64.max : Int64(bytes)
    }

    /// A packet no larger than this is read (OpenSSH's sftp-server sends at most 256 KiB and some).
    static let maxPacket = 1 << 20

    struct Reader {
        let data: Data
        var at: Int
        var end: Int

        init(_ data: Data, at: Int) {
            self.data = data
            self.at = at
            self.end = data.endIndex
        }

        var left: Int { end - at }

        mutating func byte() throws(SFTPProtocolError) -> UInt8 {
            guard left >= 1 else { throw SFTPProtocolError("a packet cut short") }
            defer { at += 1 }
            return data[at]
        }

        mutating func uint32() throws(SFTPProtocolError) -> UInt32 {
            guard left >= 4 else { throw SFTPProtocolError("a packet cut short") }
            var value: UInt32 = 0
            for i in 0..<4 { value = value << 8 | UInt32(data[at + i]) }
            at += 4
            return value
        }

        mutating func uint64() throws(SFTPProtocolError) -> UInt64 {
            let high = UInt64(try uint32())
            return high << 32 | UInt64(try uint32())
        }

        mutating func string() throws(SFTPProtocolError) -> Data {
            let count = Int(try uint32())
            guard left >= count else { throw SFTPProtocolError("a string past its packet's end") }
            defer { at += count }
            return data.subdata(in: at..<(at + count))
        }

        mutating func text() throws(SFTPProtocolError) -> String {
            String(decoding: try string(), as: UTF8.self)
        }

        mutating func attributes() throws(SFTPProtocolError) -> Attributes {
            let flags = try uint32()
            var attributes = Attributes()
            if flags & 0x1 != 0 {
                // A size past Int64 is no size a file has: unknown.
                let size = Int64(bitPattern: try uint64())
                attributes.size = size >= 0 ? size : nil
            }
            if flags & 0x2 != 0 { _ = try uint32(); _ = try uint32() }
            if flags & 0x4 != 0 { attributes.permissions = try uint32() }
            if flags & 0x8 != 0 {
                _ = try uint32()
                attributes.mtime = Int64(try uint32())
            }
            if flags & 0x8000_0000 != 0 {
                let count = try uint32()
                for _ in 0..<count { _ = try string(); _ = try string() }
            }
            return attributes
        }
    }
}

/// A reply that does not follow the protocol (a server that is not an sftp server, or a broken one).
struct SFTPProtocolError: Error {
    let message: String
    init(_ message: String) { self.message = message }
}
