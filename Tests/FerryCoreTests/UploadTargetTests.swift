@testable import FerryEngine
import FerryModel
import Foundation
import Testing

/// Where `ferry put` (and the screen's upload) sends a file, by the URL's scheme (UploadSpec.to).
@Suite struct UploadTargetTests {
    let file = UploadSource.file(path: "/home/me/report 2026.pdf")

    @Test func anSFTPDirectoryKeepsTheFilesNameAndTheUploadIsThePlainBytes() throws {
        let (upload, url) = try UploadSpec.to(URL(string: "sftp://box/srv/in/")!, file, contentType: nil, form: nil, method: nil)
        #expect(url.absoluteString == "sftp://box/srv/in/report%202026.pdf")
        #expect(upload.method == "PUT")
        #expect(upload.resumable == nil, "no HTTP resumable-upload protocol over SSH")
        let (_, named) = try UploadSpec.to(URL(string: "scp://box/srv/in/copy.pdf")!, file, contentType: nil, form: nil, method: nil)
        #expect(named.absoluteString == "scp://box/srv/in/copy.pdf")
    }

    @Test func anHTTPURLIsUsedAsGiven() throws {
        let (upload, url) = try UploadSpec.to(URL(string: "https://host/up/")!, file, contentType: nil, form: nil, method: nil)
        #expect(url.absoluteString == "https://host/up/")
        #expect(upload.resumable == .ietf)
    }

    @Test func whatOnlyHTTPHasIsRefusedOverSSH() {
        #expect(throws: UsageError.self) { try UploadSpec.to(URL(string: "sftp://box/in/")!, file, contentType: nil, form: [], method: nil) }
        #expect(throws: UsageError.self) { try UploadSpec.to(URL(string: "sftp://box/in/")!, file, contentType: nil, form: nil, method: "POST") }
        #expect(throws: UsageError.self) { try UploadSpec.to(URL(string: "scp://box/in/")!, file, contentType: nil, form: nil, method: nil, resumable: .tus) }
    }
}
