/// How many bytes each PATCH of a resumable upload carries (tus, and IETF appends): `[uploads] chunk`, or a
/// host's `upload_chunk`.
///
/// A server that keeps nothing of a cut request (PyPI's `resumable-upload`, tus's Node server) loses a cut
/// request's bytes: chunks bound that loss, and servers that refuse large PATCHes take them (the default,
/// 6 MiB: what Supabase takes; Cloudflare Stream and tusd's S3 store want at least 5 MiB in multiples of
/// 256 KiB). Each chunk also costs a round trip and the server's commit, which on a fast link with some
/// latency is a large share (6 MiB chunks through 20 ms: 1.69 x one PATCH). `auto` starts at 6 MiB and, while
/// the link is fast, grows to what goes in `target` seconds at the rate the last chunk went (a multiple of
/// 256 KiB, at most `ceiling`, Cloudflare's 200 MiB rounded down): a chunk's round trip is then at most
/// 20 ms / 2 s = 1 % of a 20 ms link, and a cut costs up to `target` seconds of sending. A server that refuses
/// a grown chunk (413) is sent the start size from then on. Not the default: a server that reads a refused
/// PATCH whole before it answers (PyPI's) costs the grown chunk once, and one that keeps nothing of a cut
/// request costs it at each cut.
public struct UploadChunking: Sendable, Equatable {
    /// The chunk now (0: the rest in one request).
    public private(set) var size: Int64
    public private(set) var grows: Bool
    private let start: Int64

    /// 6 MiB: what Supabase takes, and a multiple of 256 KiB of at least 5 MiB.
    static let startSize: Int64 = 6 << 20
    /// `auto`: 6 MiB, growing.
    public static let auto = UploadChunking(size: startSize, grows: true)
    /// The default: 6 MiB chunks.
    public static let standard = UploadChunking(size: startSize, grows: false)

    public static let target: Double = 2
    public static let ceiling: Int64 = 192 << 20
    static let granule: Int64 = 256 << 10

    public init(size: Int64, grows: Bool) {
        self.size = max(0, size)
        self.start = max(0, size)
        self.grows = grows && size > 0
    }

    /// The bytes of an append from `offset` of a `length`-byte upload.
    public func count(from offset: Int64, of length: Int64) -> Int64 {
        let rest = max(0, length - offset)
        return size > 0 ? min(size, rest) : rest
    }

    /// A chunk of `count` bytes went (request to answer) in `seconds`: the next one is what goes in `target`
    /// seconds at that pace, never less than it is now. Only a whole chunk counts (the last is often small).
    public mutating func sent(_ count: Int64, in seconds: Double) {
        guard grows, count >= size, seconds > 0 else { return }
        let paced = Double(count) / seconds * Self.target
        guard paced.isFinite else { return }
        let rounded = Int64(min(paced, Double(Self.ceiling))) / Self.granule * Self.granule
        size = max(size, min(rounded, Self.ceiling))
    }

    /// The server refused a chunk as too large: the start size from now on, without growing. False when the
    /// chunk was the start size already (the refusal is the server's answer to that).
    public mutating func refused() -> Bool {
        guard size > start else { return false }
        size = start
        grows = false
        return true
    }
}
