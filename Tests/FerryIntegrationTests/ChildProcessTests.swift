import Foundation
import Testing
import TestHTTPServer

/// The tests' own spawn (ChildProcess, in place of Foundation's Process, whose descriptor scan over-reads with
/// over a thousand descriptors open): a child starts with the descriptors it was given and no others, whatever
/// the test process has open without FD_CLOEXEC.
@Suite struct ChildProcessTests {
    @Test func aChildGetsItsThreeStandardDescriptorsAndNoOthers() async throws {
        var opened: [Int32] = []
        defer { opened.forEach { close($0) } }
        for _ in 0..<300 {
            let fd = open("/dev/null", O_RDONLY)  // inheritable on purpose
            try #require(fd >= 0)
            opened.append(fd)
        }
        // ls lists its own handle of the directory too (the lowest free number, 3).
        let listing = try await runProgram("/bin/ls", ["/proc/self/fd"])
        #expect(listing.split(separator: "\n") == ["0", "1", "2", "3"])
    }
}
