import FerryModel
import FerryStorage
import FerryTransport
import Foundation

/// The last steps of a download, off the delegate queue: the size check and the checksum (`check`, on the
/// finish queue, files in parallel), then the sync and the rename of the `.part` file to its final name
/// (`publish`, on the publish queue, files that are ready together at once: FileSync). The same for a single
/// stream and for ranges.
enum FileFinisher {
    typealias Outcome = Result<(name: String, size: Int64), TransferFailure>

    /// A file that checked out, on its way to be synced and published; `done` hears how that went.
    struct Checked: @unchecked Sendable {
        // Only the publish queue touches the file now.
        let file: PartialFile
        let fileName: String
        let size: Int64
        let spec: TransferSpec
        let done: @Sendable (Outcome) -> Void
    }

    /// Writes what is still buffered, then checks the file: nil handover is a file that could not be opened.
    /// A tree's copy (`spec.mirror`) takes the server's time (`modified`: the answer's Last-Modified, else the
    /// listing's) and is marked as ferry's copy of its URL. A file that does not check out is closed.
    static func check(_ handover: FileHandover?, spec: TransferSpec, modified: Date? = nil)
        -> Result<(file: PartialFile, fileName: String, size: Int64), TransferFailure> {
        guard let handover else { return .failure(.local(.other, "cannot open the downloaded file in \(spec.directory)")) }
        do throws(TransferFailure) {
            try handover.file.flush()
            if let mirror = spec.mirror {
                // After the last write, which would set the time again.
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
            return .success((handover.file, handover.fileName, size))
        } catch {
            handover.file.close()
            return .failure(error)
        }
    }

    /// Makes the files durable (together: FileSync), gives each its final name without replacing a file
    /// (NameClaims), makes the names durable (each directory once), then tells each how it went. A file is
    /// published only once it is durable: a power cut never leaves an empty or short file under a final name.
    static func publish(_ files: [Checked], names: NameClaims) {
        let failedSyncs = FileSync.syncTogether(files.map(\.file.fd))
        var outcomes: [Outcome] = []
        var directories: [String] = []
        var seen: Set<String> = []
        for (index, checked) in files.enumerated() {
            let spec = checked.spec
            defer { checked.file.close() }
            if let err = failedSyncs[index] {
                outcomes.append(.failure(.local("cannot sync \(checked.file.path)", errno: err)))
                continue
            }
            do throws(TransferFailure) {
                let finalName = try names.publish(directory: spec.directory, name: checked.fileName,
                                                  replacing: spec.replacing, syncingDirectory: false)
                names.release(directory: spec.directory, name: checked.fileName)
                names.release(directory: spec.directory, name: finalName)
                if seen.insert(spec.directory).inserted { directories.append(spec.directory) }
                outcomes.append(.success((finalName, checked.size)))
            } catch {
                outcomes.append(.failure(error))
            }
        }
        FileSync.syncDirectories(directories)
        for (checked, outcome) in zip(files, outcomes) { checked.done(outcome) }
    }
}
