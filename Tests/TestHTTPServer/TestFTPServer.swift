import FerryCore
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// An FTP server on 127.0.0.1 for a test (scripts/ftp-test-server.py: pyftpdlib, Debian's python3-pyftpdlib), with
/// one user, serving a directory of its own. Its log says each transfer's bytes (`transfers`). Stopped with the value.
public final class TestFTPServer: @unchecked Sendable {
    public static let python = "/usr/bin/python3"
    public let directory: String
    public let port: Int
    public let user = "ferry"
    public let password = "pass-\(UInt32.random(in: 1000...9999))"
    private let log: String
    private let process: ChildProcess

    /// `tls`: explicit TLS (AUTH TLS), required, with the server certificate `tls` signs for 127.0.0.1 (ftps://).
    public init(tls: TestCertificateAuthority? = nil) throws {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("scripts/ftp-test-server.py").path
        guard FileManager.default.isExecutableFile(atPath: Self.python),
              (try? TestSSHServer.run(Self.python, ["-c", "import pyftpdlib"])) != nil else {
            throw TestSSHServer.Missing(description: "the FTP tests need pyftpdlib for \(Self.python): apt-get install python3-pyftpdlib (the README's set-up line)")
        }
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("ferry-ftpd-\(UUID().uuidString)").path
        directory = base + "/root"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        log = base + "/ftpd.log"
        var arguments = [script, directory, user, password]
        if let tls {
            guard (try? TestSSHServer.run(Self.python, ["-c", "import OpenSSL"])) != nil else {
                throw TestSSHServer.Missing(description: "the ftps tests need pyOpenSSL for \(Self.python): apt-get install python3-openssl (the README's set-up line)")
            }
            let pem = base + "/server.pem"
            try (tls.serverCertificatePEM + "\n" + tls.serverPrivateKeyPEM).write(toFile: pem, atomically: true, encoding: .utf8)
            arguments += ["--tls", pem]
        }
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        let output = Pipe()
        let child = ChildProcess()
        child.executableURL = URL(fileURLWithPath: Self.python)
        child.arguments = arguments
        child.standardOutput = output
        child.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        try child.run()
        process = child
        // Its first line: PORT n.
        var line = Data()
        let reader = output.fileHandleForReading
        while !line.contains(UInt8(ascii: "\n")) {
            let piece = reader.availableData
            if piece.isEmpty { break }
            line.append(piece)
        }
        guard let text = String(data: line, encoding: .utf8), text.hasPrefix("PORT "),
              let port = Int(text.dropFirst(5).prefix { $0.isNumber }) else {
            child.terminate()
            throw TestSSHServer.Missing(description: "the FTP server did not start: \((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
        }
        self.port = port
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(atPath: (directory as NSString).deletingLastPathComponent)
    }

    /// The URL of `relativePath` in the served directory (each component percent-encoded; the path is the
    /// server's, from its root).
    public func url(_ relativePath: String, scheme: String = "ftp", login: Bool = true) -> URL {
        let path = relativePath.split(separator: "/").map {
            String($0).addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(CharacterSet(charactersIn: "/"))) ?? String($0)
        }.joined(separator: "/")
        return URL(string: "\(scheme)://\(login ? "\(user):\(password)@" : "")127.0.0.1:\(port)/\(path)")!
    }

    public func put(_ data: Data, at relativePath: String) throws {
        let path = directory + "/" + relativePath
        try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try data.write(to: URL(fileURLWithPath: path))
    }

    public func path(_ relativePath: String) -> String { directory + "/" + relativePath }

    /// Each transfer the server ended: what (RETR, STOR), the file, and the bytes it sent or received.
    public var transfers: [(what: String, path: String, bytes: Int64)] {
        ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(whereSeparator: \.isNewline).compactMap { line in
            let words = line.split(separator: " ")
            guard words.count >= 4, words[0] == "DONE", let bytes = Int64(words[words.count - 1]) else { return nil }
            return (String(words[1]), words[2..<(words.count - 1)].joined(separator: " "), bytes)
        }
    }
}
