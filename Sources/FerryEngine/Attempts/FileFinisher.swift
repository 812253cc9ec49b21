import FerryModel
import FerryStorage
import FerryTransport
import Foundation

/// The last steps of a download, off the delegate queue, on the publish queue: what is still buffered written,
/// the size checked, then the sync and the rename of the `.part` file to its final name, for the files that are
/// ready together at once (FileSync). A file with a SHA-256 to check is checked first on the finish queue (its
/// read of the whole file must not hold up the others). The same for a single stream and for ranges.
enum FileFinisher {
    typealias Outcome = Result<(name: String, size: Int64), TransferFailure>

    /// A downloaded file on its way to be checked, synced and published; `done` hears how that went. A nil
    /// handover is a file that could not be opened.
    struct Finishing: @unchecked Sendable {
        // Only the finish and publish queues touch the file now, one after the other.
        let handover: FileHandover?
        let spec: TransferSpec
        /// The answer's Last-Modified, else the listing's, for a tree's copy (`spec.mirror`).
        let modified: Date?
        let done: @Sendable (Outcome) -> Void
    }

    /// Checks the file's SHA-256 when its spec has one (nil: it does, or there is none to check); a file that
    /// does not check out is closed. On the finish queue, before the file joins the others.
    static func verify(_ finishing: Finishing) -> TransferFailure? {
        guard let expected = finishing.spec.sha256, let handover = finishing.handover else { return nil }
        do throws(TransferFailure) {
            try handover.file.flush()
            let actual = try FileDigest.sha256Hex(fd: handover.file.fd, path: handover.file.path)
            if actual != expected {
                throw .integrity(.checksum, "SHA-256 mismatch: expected \(expected), got \(actual)")
            }
            return nil
        } catch {
            handover.file.close()
            return error
        }
    }

    /// Writes what is still buffered and checks the size. A tree's copy (`spec.mirror`) takes the server's time
    /// and is marked as ferry's copy of its URL. A file that does not check out is closed.
    private static func prepare(_ finishing: Finishing) -> Result<Int64, TransferFailure> {
        let spec = finishing.spec
        guard let handover = finishing.handover else {
            return .failure(.local(.other, "cannot open the downloaded file in \(spec.directory)"))
        }
        do throws(TransferFailure) {
            try handover.file.flush()
            if let mirror = spec.mirror {
                // After the last write, which would set the time again.
                FileOrigin.mark(fd: handover.file.fd, url: spec.url, modified: finishing.modified ?? mirror.modified)
            }
            let size = handover.file.size
            if let total = handover.total, size != total {
                throw .protocolViolation("received \(size) of \(total) bytes")
            }
            return .success(size)
        } catch {
            handover.file.close()
            return .failure(error)
        }
    }

    /// Prepares the files, makes those that check out durable (together: FileSync), gives each its final name
    /// without replacing a file (NameClaims), makes the names durable (each directory once), then tells each how
    /// it went. A file is published only once it is durable: a power cut never leaves an empty or short file under
    /// a final name.
    static func publish(_ files: [Finishing], names: NameClaims) {
        var outcomes = [Outcome?](repeating: nil, count: files.count)
        // Those that checked out (a handover, then): their index in `files` and their size.
        var ready: [(index: Int, size: Int64)] = []
        for (index, finishing) in files.enumerated() {
            switch prepare(finishing) {
            case let .success(size): ready.append((index, size))
            case let .failure(failure): outcomes[index] = .failure(failure)
            }
        }
        let failedSyncs = FileSync.syncTogether(ready.map { files[$0.index].handover!.file.fd })
        var directories: [String] = []
        var seen: Set<String> = []
        for (at, (index, size)) in ready.enumerated() {
            let spec = files[index].spec
            let handover = files[index].handover!
            defer { handover.file.close() }
            if let err = failedSyncs[at] {
                outcomes[index] = .failure(.local("cannot sync \(handover.file.path)", errno: err))
                continue
            }
            do throws(TransferFailure) {
                let finalName = try names.publish(directory: spec.directory, name: handover.fileName, replacing: spec.replacing)
                names.release(directory: spec.directory, name: handover.fileName)
                names.release(directory: spec.directory, name: finalName)
                if seen.insert(spec.directory).inserted { directories.append(spec.directory) }
                outcomes[index] = .success((finalName, size))
            } catch {
                outcomes[index] = .failure(error)
            }
        }
        FileSync.syncDirectories(directories)
        for (finishing, outcome) in zip(files, outcomes) { finishing.done(outcome!) }
    }
}
