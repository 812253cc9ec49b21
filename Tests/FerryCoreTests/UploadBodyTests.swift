import Foundation
import Testing
@testable import FerryCore
@testable import FerryEngine
@testable import FerryModel
@testable import FerryStorage
@testable import FerryTransport

@Suite struct UploadBodyTests {
    func readAll(_ stream: InputStream, chunk: Int = 7) -> Data {
        stream.open()
        var out = Data()
        var buffer = [UInt8](repeating: 0, count: chunk)
        while stream.hasBytesAvailable {
            let n = stream.read(&buffer, maxLength: chunk)
            if n <= 0 { break }
            out.append(contentsOf: buffer[0..<n])
        }
        return out
    }

    @Test func segmentsAreReadInOrderWithoutLoadingTheFile() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ferry-body-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("f.bin").path
        let content = Data((0..<100_000).map { UInt8($0 % 251) })
        _ = FileManager.default.createFile(atPath: file, contents: content)
        let plan = BodyPlan(pieces: [.bytes(Data("head".utf8)), .file(path: file, length: Int64(content.count)),
                                       .bytes(Data("tail".utf8))], contentType: "x/y")
        #expect(plan.length == Int64(content.count + 8))
        let body = readAll(BodyStream(plan: plan), chunk: 4096)
        #expect(body == Data("head".utf8) + content + Data("tail".utf8))
    }

    /// On Linux `hasBytesAvailable == false` is taken as the end of the body; it must stay true until EOF.
    @Test func hasBytesAvailableUntilTheRealEnd() {
        let stream = BodyStream(plan: BodyPlan(pieces: [.bytes(Data("abc".utf8))], contentType: "t"))
        stream.open()
        #expect(stream.hasBytesAvailable)
        var buffer = [UInt8](repeating: 0, count: 8)
        #expect(stream.read(&buffer, maxLength: 8) == 3)
        #expect(stream.hasBytesAvailable)
        #expect(stream.read(&buffer, maxLength: 8) == 0)
        #expect(!stream.hasBytesAvailable)
        #expect(stream.streamStatus == .atEnd)
    }

    @Test func aFileThatShrinksIsAnErrorNotAShortBody() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ferry-shrink-\(UUID().uuidString)").path
        _ = FileManager.default.createFile(atPath: path, contents: Data(count: 10))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let stream = BodyStream(plan: BodyPlan(pieces: [.file(path: path, length: 100)], contentType: "t"))
        stream.open()
        var buffer = [UInt8](repeating: 0, count: 1000)
        // Not the length planned when the body is first read: an error before any byte of it goes.
        #expect(stream.read(&buffer, maxLength: 1000) == -1)
        #expect(stream.streamError?.localizedDescription.hasSuffix("changed while it was being uploaded (100 bytes when it began, 10 now)") == true,
                "\(String(describing: stream.streamError))")
    }

    @Test func namesAreEscapedSoNoHeaderCanBeInjected() {
        #expect(MultipartForm.escape("a\"b\r\nContent-Type: evil\\") == "a%22b%0D%0AContent-Type: evil%5C")
        #expect(MultipartForm.escape("数 x") == "数 x")
    }

    @Test func aBoundaryInAFieldIsReplaced() throws {
        let form = MultipartForm(parts: [.field(name: "t", value: "x--ferry-clash y")], boundary: "ferry-clash")
        let plan = try form.plan()
        #expect(!plan.contentType.hasSuffix("boundary=ferry-clash"))
        #expect(plan.contentType.hasPrefix("multipart/form-data; boundary=ferry-"))
    }

    @Test func standardInputIsOnlyARawBody() throws {
        let form = MultipartForm(parts: [.field(name: "a", value: "b"),
                                         .file(name: "f", source: .standardInput, fileName: "stdin", contentType: "x/y")])
        #expect(throws: BodyError.self) { try form.plan() }
        #expect(try MultipartForm(parts: [.field(name: "a", value: "b")]).plan().length != nil)
        let raw = try BodyPlan.make(for: UploadSpec(method: "PUT", body: .raw(.standardInput, contentType: "x/y")))
        #expect(raw.length == nil)
    }

    @Test func aStandardInputSegmentIsNeverStreamed() {
        let stream = BodyStream(plan: BodyPlan(pieces: [.standardInput], contentType: "t"))
        stream.open()
        var buffer = [UInt8](repeating: 0, count: 8)
        #expect(stream.read(&buffer, maxLength: 8) == -1)
    }

    @Test func missingFilesAndDirectoriesAreRefused() {
        #expect(throws: BodyError.self) { try BodyPlan.checkedFileLength("/nonexistent/ferry") }
        #expect(throws: BodyError.self) { try BodyPlan.checkedFileLength("/tmp") }
    }

    @Test func mimeTypesByExtension() {
        #expect(MIMETypes.type(forFileName: "a.PNG") == "image/png")
        #expect(MIMETypes.type(forFileName: "x.tar.gz") == "application/gzip")
        #expect(MIMETypes.type(forFileName: "notes.txt") == "text/plain")
        #expect(MIMETypes.type(forFileName: "clip.mp4") == "video/mp4")
        #expect(MIMETypes.type(forFileName: "song.flac") == "audio/flac")
        #expect(MIMETypes.type(forFileName: "data.json") == "application/json")
        #expect(MIMETypes.type(forFileName: "doc.pdf") == "application/pdf")
        #expect(MIMETypes.type(forFileName: "README") == MIMETypes.fallback)
        #expect(MIMETypes.type(forFileName: ".bashrc") == MIMETypes.fallback)
    }

    @Test func postIsOnlyRetriedWhenTheServerCannotHaveActed() {
        let policy = RetryPolicy()
        let top: (ClosedRange<Double>) -> Double = { $0.upperBound }
        #expect(policy.decide(.http(status: 500, reason: "", retryAfter: nil), retries: 0, idempotent: false) == .giveUp)
        #expect(policy.decide(.http(status: 502, reason: "", retryAfter: nil), retries: 0, idempotent: false) == .giveUp)
        #expect(policy.decide(.http(status: 503, reason: "", retryAfter: 1), retries: 0, idempotent: false, random: top) == .retry(after: 1))
        #expect(policy.decide(.http(status: 429, reason: "", retryAfter: nil), retries: 0, idempotent: false, random: top) == .retry(after: 1))
        #expect(policy.decide(.transport(code: -1004, kind: .refused, message: ""), retries: 0, idempotent: false, random: top) == .retry(after: 1))
    }
}
