import Foundation
import Synchronization
import Testing
#if canImport(Glibc)
import Glibc
#endif
@testable import FerryEngine
@testable import FerryModel
@testable import FerryStorage

/// Files made durable before they are published, several at once (FileSync), and the group that the publish
/// queue hands the finisher (BatchedDelivery, FileFinisher.publish).
@Suite struct FileSyncTests {
    static func temporaryDirectory() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ferry-sync-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        return path
    }

    static func written(_ path: String, _ text: String) -> Int32 {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        _ = text.withCString { write(fd, $0, strlen($0)) }
        return fd
    }

    @Test func syncfsIsTrustedFromLinux58On() {
        #expect(FileSync.reportsSyncErrors(kernelRelease: "6.18.44-fc-v657"))
        #expect(FileSync.reportsSyncErrors(kernelRelease: "5.8.0"))
        #expect(FileSync.reportsSyncErrors(kernelRelease: "5.15.0-122-generic"))
        #expect(FileSync.reportsSyncErrors(kernelRelease: "10.1"))
        #expect(!FileSync.reportsSyncErrors(kernelRelease: "5.7.19"))
        #expect(!FileSync.reportsSyncErrors(kernelRelease: "4.18.0-553.el8_10.x86_64"))
        #expect(!FileSync.reportsSyncErrors(kernelRelease: "3.10.0-1160.el7.x86_64"))
        #expect(!FileSync.reportsSyncErrors(kernelRelease: "linux"))
    }

    /// Files of two file systems (the temporary directory and /dev/shm's tmpfs, where there is one) are synced
    /// by file system; a descriptor that cannot be synced is named with its error, and only it.
    @Test func aGroupIsSyncedAndOnlyTheFileThatCannotBeIsNamed() throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var fds = (0..<3).map { Self.written(directory + "/f\($0)", "body \($0)") }
        let shm = "/dev/shm/ferry-sync-\(UUID().uuidString)"
        if FileManager.default.fileExists(atPath: "/dev/shm") { fds.append(Self.written(shm, "elsewhere")) }
        defer { unlink(shm) }
        #expect(fds.allSatisfy { $0 >= 0 })
        // A descriptor no longer open: closed, and named by a number never given out (a closed one's number is
        // given to the next file any test running beside this one opens, which made this check flaky).
        close(fds[1])
        fds[1] = -1
        let failed = FileSync.syncTogether(fds)
        #expect(failed == [1: EBADF])
        for fd in fds where fd >= 0 { close(fd) }
        // One file alone, and no file at all.
        let alone = Self.written(directory + "/alone", "one")
        #expect(FileSync.syncTogether([alone]).isEmpty)
        close(alone)
        #expect(FileSync.syncTogether([]).isEmpty)
    }

    /// What is sent while a delivery runs waits and goes in the next one, together: the publish queue's group.
    @Test func itemsSentWhileADeliveryRunsGoTogetherInTheNext() {
        let groups = Mutex<[[Int]]>([])
        let started = DispatchSemaphore(value: 0)
        let gate = DispatchSemaphore(value: 0)
        let delivery = BatchedDelivery<Int>(queue: DispatchQueue(label: "test.publish")) { items in
            let first = groups.withLock { groups in
                groups.append(items)
                return groups.count == 1
            }
            if first {
                started.signal()
                gate.wait()
            }
        }
        delivery.send([1])
        started.wait()
        for item in 2...4 { delivery.send([item]) }
        gate.signal()
        delivery.flush()
        #expect(groups.withLock { $0 } == [[1], [2, 3, 4]])
    }

    /// A group is checked and synced, then each file takes its final name; a file whose sync fails, or that is
    /// short, keeps its `.part` file and is told why, the others are published all the same.
    @Test func aGroupIsPublishedAndAFileThatCannotBeSyncedKeepsItsPartFile() throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let names = NameClaims()
        let outcomes = Mutex<[Int: FileFinisher.Outcome]>([:])
        var group: [FileFinisher.Finishing] = []
        for index in 0..<4 {
            let url = URL(string: "http://example.test/f\(index).bin")!
            let claim = try names.claim(directory: directory, name: "f\(index).bin")
            let file = PartialFile(path: PartialFile.path(directory: directory, name: claim.name), fd: claim.fd, bufferSize: 0)
            // Written when the group is prepared, not before.
            file.expectedSize = 6
            try file.append(Data("body \(index)".utf8))
            if index == 1 {
                try file.flush()
                file.close()
            }
            let handover = FileHandover(file: file, fileName: claim.name, total: index == 3 ? 100 : 6)
            group.append(.init(handover: handover, spec: TransferSpec(download: url, directory: directory), modified: nil) { outcome in
                outcomes.withLock { $0[index] = outcome }
            })
        }
        FileFinisher.publish(group, names: names)
        let told = outcomes.withLock { $0 }
        #expect(told.count == 4)
        for index in [0, 2] {
            guard case let .success(published)? = told[index] else {
                Issue.record("file \(index): \(String(describing: told[index]))")
                continue
            }
            #expect(published.name == "f\(index).bin" && published.size == 6)
            #expect(FileManager.default.contents(atPath: directory + "/f\(index).bin") == Data("body \(index)".utf8))
            #expect(!FileManager.default.fileExists(atPath: directory + "/f\(index).bin.part"))
        }
        for (index, words) in [(1, "cannot sync"), (3, "received 6 of 100 bytes")] {
            guard case let .failure(failure)? = told[index] else {
                Issue.record("file \(index) should have failed: \(String(describing: told[index]))")
                continue
            }
            #expect(failure.message.contains(words))
            #expect(FileManager.default.fileExists(atPath: directory + "/f\(index).bin.part"))
            #expect(!FileManager.default.fileExists(atPath: directory + "/f\(index).bin"))
        }
    }
}
