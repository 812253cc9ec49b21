import FerryModel
import FerryStorage
import FerryTransport
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// An upload body described by Sendable pieces, turned into a fresh stream for every (re)send.
/// Never holds a file's bytes in memory: file pieces are read with pread as the session asks for them.
public struct BodyPlan: Sendable, Equatable {
    public enum Piece: Sendable, Equatable {
        case bytes(Data)
        case file(path: String, length: Int64)
        /// Only ever a whole raw body: sent from the session's non-blocking file source, chunked.
        case standardInput
    }

    public var pieces: [Piece]
    public var contentType: String

    /// Known length (sent as Content-Length), or nil when stdin is part of it (sent chunked).
    public var length: Int64? {
        var total: Int64 = 0
        for piece in pieces {
            switch piece {
            case let .bytes(data): total += Int64(data.count)
            case let .file(_, length): total += length
            case .standardInput: return nil
            }
        }
        return total
    }

    /// Checks every file now (exists, regular, readable) and takes its length.
    public static func make(for upload: UploadSpec, boundary: String = MultipartForm.randomBoundary()) throws(BodyError) -> BodyPlan {
        switch upload.body {
        case let .raw(source, contentType):
            return BodyPlan(pieces: [try piece(for: source)], contentType: contentType)
        case let .multipart(parts):
            return try MultipartForm(parts: parts, boundary: boundary).plan()
        }
    }

    static func piece(for source: UploadSource) throws(BodyError) -> Piece {
        switch source {
        case .standardInput:
            return .standardInput
        case let .file(path):
            return .file(path: path, length: try checkedFileLength(path))
        }
    }

    /// The length of a file we are about to upload, or a message naming what is wrong with it.
    public static func checkedFileLength(_ path: String) throws(BodyError) -> Int64 {
        var st = stat()
        guard stat(path, &st) == 0 else {
            throw BodyError.cannotUpload(path, errno: errno)
        }
        if (st.st_mode & S_IFMT) == S_IFDIR { throw BodyError("cannot upload \(TerminalSafe.sanitize(path)): it is a directory") }
        guard (st.st_mode & S_IFMT) == S_IFREG else {
            throw BodyError("cannot upload \(TerminalSafe.sanitize(path)): not a regular file")
        }
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            throw BodyError.cannotUpload(path, errno: errno)
        }
        close(fd)
        return Int64(st.st_size)
    }
}

extension BodyError {
    /// A file that cannot be uploaded for `errno`: no permission, or it cannot be read.
    static func cannotUpload(_ path: String, errno code: Int32) -> BodyError {
        let kind = FailureKind(errno: code)
        return BodyError("cannot upload \(TerminalSafe.sanitize(path)): \(String(cString: strerror(code)))",
                         kind: kind == .noPermission ? .noPermission : .unreadableFile)
    }
}
