import FerryModel
import FerryStorage
import FerryTransport
import Foundation

/// The last steps of a download, off the delegate queue: size check, checksum, fsync, and the rename of the
/// `.part` file to its final name. The same for a single stream and for ranges.
enum FileFinisher {
    /// The published name and the file's size, or why the file did not check out. A nil handover is a file
    /// that could not be opened.
    /// A tree's copy (`spec.mirror`) takes the server's time (`modified`: the answer's Last-Modified, else the
    /// listing's), is marked as ferry's copy of its URL, and replaces ferry's own earlier copy (NameClaims).
    static func finish(_ handover: FileHandover?, spec: TransferSpec, names: NameClaims, modified: Date? = nil)
        -> Result<(name: String, size: Int64), TransferFailure> {
        do throws(TransferFailure) {
            guard let handover else { throw .local(.other, "cannot open the downloaded file in \(spec.directory)") }
            defer { handover.file.close() }
            try handover.file.sync()
            if let mirror = spec.mirror {
                // After the sync: the last buffered write would set the time again.
                FileOrigin.mark(fd: handover.file.fd, url: spec.url, modified: modified ?? mirror.modified)
            }
            let size = handover.file.size
            if let total = handover.total, size != total {
                throw .protocolViolation("received \(size) of \(total) bytes")
            }
            if let expected = spec.sha256 {
                let actual = try FileDigest.sha256Hex(fd: handover.file.fd, path: handover.file.path)
                if actual != expected {
                    throw .integrity(.checksum, "SHA-256 mismatch: expected \(expected), got \(actual)")
                }
            }
            let finalName = try names.publish(directory: spec.directory, name: handover.fileName,
                                              replacing: spec.replacing)
            names.release(directory: spec.directory, name: handover.fileName)
            names.release(directory: spec.directory, name: finalName)
            return .success((finalName, size))
        } catch {
            return .failure(error)
        }
    }
}
