import Foundation

/// A protocol that lets an upload cut part-way go on from where the server's copy ends.
public enum ResumableProtocol: String, Sendable, Codable, Equatable, CaseIterable {
    /// draft-ietf-httpbis-resumable-upload, as URLSession on Apple's systems offers it with every upload:
    /// the upload itself, a `104 Upload Resumption Supported` with its location from a server that knows it,
    /// then `HEAD` for the offset and `PATCH` with the rest.
    case ietf
    /// tus 1.0 (core, creation, termination): `POST` to the creation endpoint, `PATCH` with the bytes,
    /// `HEAD` for the offset, `DELETE` to cancel.
    case tus

    /// As the detail view and `ferry show` name it.
    public var title: String {
        switch self {
        case .ietf: return "IETF resumable upload (draft, interop version \(Self.ietfInteropVersion))"
        case .tus: return "tus 1.0"
        }
    }

    /// The draft's interop version ferry speaks (URLSession's current one; swift-nio-extras serves 3, 5 and 6).
    public static let ietfInteropVersion = 6
}

/// Where a resumable upload stands on the server, kept with the item: the upload's location, the last offset
/// the server confirmed, and the file it was made from (a changed file cannot be resumed).
public struct ResumableUpload: Sendable, Codable, Equatable {
    /// One time the upload went on from the server's offset.
    public struct Resumption: Sendable, Codable, Equatable {
        public var at: Date
        public var offset: Int64
        public init(at: Date, offset: Int64) {
            self.at = at
            self.offset = offset
        }
    }

    public var kind: ResumableProtocol
    /// The upload resource on the server (absolute); nil until the server made one.
    public var location: String?
    /// Bytes the server said it holds (by HEAD, a 104's creation, or a tus PATCH's answer). What was sent
    /// beyond it is sent again.
    public var confirmedOffset: Int64 = 0
    /// The file when the upload was made: its size, its modification time, and a hash of its first and last MiB.
    public var fileSize: Int64?
    public var fileModified: TimeInterval?
    public var fileFingerprint: String?
    /// The last resumptions, oldest first (at most `resumptionsKept`).
    public var resumptions: [Resumption] = []
    /// Why the server's copy was last dropped and the upload started over (shown once, in the detail view).
    public var restartReason: String?

    public static let resumptionsKept = 20

    public init(kind: ResumableProtocol) {
        self.kind = kind
    }

    /// The location without user information (what the screen and listings show), terminal-safe.
    public var displayLocation: String? {
        location.map { TerminalSafe.sanitize(TerminalSafe.removingUserInfo($0)) }
    }

    public mutating func noteResumption(at offset: Int64, now: Date = Date()) {
        resumptions.append(Resumption(at: now, offset: offset))
        if resumptions.count > Self.resumptionsKept { resumptions.removeFirst(resumptions.count - Self.resumptionsKept) }
        confirmedOffset = offset
    }
}

