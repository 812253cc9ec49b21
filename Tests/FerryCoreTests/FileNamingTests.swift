import Foundation
import Testing
@testable import FerryCore
@testable import FerryEngine
@testable import FerryModel
@testable import FerryStorage
@testable import FerryTransport

@Suite struct FileNamingContentDispositionTests {
    /// The strict decoder a tree's walk uses says what Foundation's `removingPercentEncoding` says, without its way
    /// through CFString: the same text, or nil for a stray "%" and for bytes that are not UTF-8.
    @Test func percentDecodingIsFoundationsWithoutItsCost() {
        let cases = ["plain", "caf%C3%A9", "caf%c3%a9", "100%25", "a%2Fb", "a+b", "%", "%4", "%zz", "ab%4", "%C3%28", "%FF",
                     "na%C3%AFve%20r%C3%A9sum%C3%A9.txt", "%E6%97%A5%E6%9C%AC", "%00", "x%41y", "", "%%41", "%4g"]
        for text in cases {
            #expect(FileNaming.percentDecoded(text[...]) == text.removingPercentEncoding, "\(text)")
        }
    }

    @Test func quotedFilename() {
        #expect(FileNaming.filename(fromContentDisposition: #"attachment; filename="report.pdf""#) == "report.pdf")
    }

    @Test func tokenFilename() {
        #expect(FileNaming.filename(fromContentDisposition: "attachment; filename=report.pdf") == "report.pdf")
        #expect(FileNaming.filename(fromContentDisposition: "attachment; filename=report.pdf   ") == "report.pdf")
    }

    @Test func traversalIsReturnedRawThenMadeSafe() {
        let raw = FileNaming.filename(fromContentDisposition: #"attachment; filename="../../x.bin""#)
        #expect(raw == "../../x.bin")
        #expect(FileNaming.safeBaseName(raw!) == "x.bin")
    }

    @Test func dotDotGivesNoSafeName() {
        let raw = FileNaming.filename(fromContentDisposition: #"attachment; filename="..""#)
        #expect(raw == "..")
        #expect(FileNaming.safeBaseName(raw!) == nil)
        #expect(FileNaming.safeBaseName(FileNaming.filename(fromContentDisposition: "attachment; filename=..")!) == nil)
    }

    @Test func extendedUTF8() {
        #expect(FileNaming.filename(fromContentDisposition: "attachment; filename*=UTF-8''%E6%95%B0.bin") == "数.bin")
        #expect(FileNaming.filename(fromContentDisposition: "attachment; FILENAME*=utf-8''%E6%95%B0.bin") == "数.bin")
    }

    @Test func extendedISO88591() {
        #expect(FileNaming.filename(fromContentDisposition: "attachment; filename*=iso-8859-1'en'%A3%20rates.txt") == "£ rates.txt")
        #expect(FileNaming.filename(fromContentDisposition: "attachment; filename*=ISO-8859-1'en'%A3%20rates.txt") == "£ rates.txt")
    }

    @Test func extendedWinsInEitherOrder() {
        let a = #"attachment; filename="fallback.bin"; filename*=UTF-8''%E2%82%AC%20rates.bin"#
        let b = #"attachment; filename*=UTF-8''%E2%82%AC%20rates.bin; filename="fallback.bin""#
        #expect(FileNaming.filename(fromContentDisposition: a) == "€ rates.bin")
        #expect(FileNaming.filename(fromContentDisposition: b) == "€ rates.bin")
    }

    @Test func brokenExtendedFallsBackToPlain() {
        // invalid UTF-8 in filename*
        #expect(FileNaming.filename(fromContentDisposition: #"attachment; filename*=UTF-8''%FF%FE.bin; filename="ok.bin""#) == "ok.bin")
        // missing the charset'lang' part
        #expect(FileNaming.filename(fromContentDisposition: #"attachment; filename*=%41.bin; filename="ok.bin""#) == "ok.bin")
        // empty ext-value
        #expect(FileNaming.filename(fromContentDisposition: #"attachment; filename*=UTF-8''; filename="ok.bin""#) == "ok.bin")
        #expect(FileNaming.filename(fromContentDisposition: "attachment; filename*=UTF-8''%FF") == nil)
    }

    @Test func lenientPercentDecoding() {
        #expect(FileNaming.filename(fromContentDisposition: "attachment; filename*=UTF-8''100%25%2") == "100%%2")
    }

    @Test func quotedWithEscapes() {
        #expect(FileNaming.filename(fromContentDisposition: #"attachment; filename="say \"hi\".txt""#) == #"say "hi".txt"#)
        #expect(FileNaming.filename(fromContentDisposition: #"attachment; filename="a\\b.txt""#) == #"a\b.txt"#)
        #expect(FileNaming.filename(fromContentDisposition: #"attachment; filename="semi;colon.txt"; size=3"#) == "semi;colon.txt")
    }

    @Test func junkTolerated() {
        #expect(FileNaming.filename(fromContentDisposition: #"filename="x.bin""#) == "x.bin")
        #expect(FileNaming.filename(fromContentDisposition: #";;; attachment ;; filename = "x.bin" ;;"#) == "x.bin")
        #expect(FileNaming.filename(fromContentDisposition: #"attachment; filename="unbalanced.bin"#) == "unbalanced.bin")
        #expect(FileNaming.filename(fromContentDisposition: #"attachment; filename="x.bin"junk; other=1"#) == "x.bin")
        #expect(FileNaming.filename(fromContentDisposition: "attachment filename=x.bin") == "x.bin")
        #expect(FileNaming.filename(fromContentDisposition: "  \t attachment;\tfilename=x.bin") == "x.bin")
        #expect(FileNaming.filename(fromContentDisposition: "attachment; filenamex=x.bin; name=y") == nil)
    }

    @Test func absentOrEmpty() {
        #expect(FileNaming.filename(fromContentDisposition: "") == nil)
        #expect(FileNaming.filename(fromContentDisposition: "inline") == nil)
        #expect(FileNaming.filename(fromContentDisposition: "attachment; filename=") == nil)
        #expect(FileNaming.filename(fromContentDisposition: #"attachment; filename="""#) == nil)
        #expect(FileNaming.filename(fromContentDisposition: "attachment; filename") == nil)
        #expect(FileNaming.filename(fromContentDisposition: "=;=;\"") == nil)
    }

    @Test func firstPlainWins() {
        #expect(FileNaming.filename(fromContentDisposition: "attachment; filename=a.bin; filename=b.bin") == "a.bin")
    }

    @Test func hostileControlsSurviveDecodingButNotSafeBaseName() {
        let raw = FileNaming.filename(fromContentDisposition: "attachment; filename*=UTF-8''%1B%5B2Jevil%07%00.bin")
        #expect(raw == "\u{1B}[2Jevil\u{07}\u{00}.bin")
        #expect(FileNaming.safeBaseName(raw!) == "_[2Jevil__.bin")
    }
}

@Suite struct FileNamingURLTests {
    @Test func lastSegment() {
        #expect(FileNaming.filename(fromURL: URL(string: "http://h/a/b/file.iso")!) == "file.iso")
        #expect(FileNaming.filename(fromURL: URL(string: "http://h/a/b/file.iso?x=1#frag")!) == "file.iso")
        #expect(FileNaming.filename(fromURL: URL(string: "http://h/a/dir/")!) == "dir")
        #expect(FileNaming.filename(fromURL: URL(string: "http://h/a//b//")!) == "b")
    }

    @Test func percentDecoded() {
        #expect(FileNaming.filename(fromURL: URL(string: "http://h/my%20file%E6%95%B0.txt")!) == "my file数.txt")
        // an encoded slash decodes to a slash: safeBaseName then keeps only the end
        let raw = FileNaming.filename(fromURL: URL(string: "http://h/x/..%2F..%2Fetc%2Fpasswd")!)
        #expect(raw == "../../etc/passwd")
        #expect(FileNaming.safeBaseName(raw!) == "passwd")
    }

    @Test func invalidUTF8StaysEncoded() {
        #expect(FileNaming.filename(fromURL: URL(string: "http://h/a%FF.bin")!) == "a%FF.bin")
    }

    @Test func none() {
        #expect(FileNaming.filename(fromURL: URL(string: "http://h/")!) == nil)
        #expect(FileNaming.filename(fromURL: URL(string: "http://h")!) == nil)
        #expect(FileNaming.filename(fromURL: URL(string: "http://h?q=1")!) == nil)
        #expect(FileNaming.filename(fromURL: URL(string: "http://h///")!) == nil)
    }
}

@Suite struct FileNamingSafeBaseNameTests {
    @Test func separators() {
        #expect(FileNaming.safeBaseName("../../x.bin") == "x.bin")
        #expect(FileNaming.safeBaseName(#"C:\evil\x.exe"#) == "x.exe")
        #expect(FileNaming.safeBaseName("/etc/passwd") == "passwd")
        #expect(FileNaming.safeBaseName("a/b\\c/d") == "d")
        #expect(FileNaming.safeBaseName("dir/") == nil)
        #expect(FileNaming.safeBaseName("/") == nil)
    }

    @Test func dotsAndEmpty() {
        #expect(FileNaming.safeBaseName("") == nil)
        #expect(FileNaming.safeBaseName(".") == nil)
        #expect(FileNaming.safeBaseName("..") == nil)
        #expect(FileNaming.safeBaseName("...") == nil)
        #expect(FileNaming.safeBaseName(". .") == nil)
        #expect(FileNaming.safeBaseName("x/..") == nil)
    }

    @Test func controlCharacters() {
        #expect(FileNaming.safeBaseName("a\u{1B}[31mb.txt") == "a_[31mb.txt")
        #expect(FileNaming.safeBaseName("bell\u{07}.txt") == "bell_.txt")
        #expect(FileNaming.safeBaseName("nul\u{00}.txt") == "nul_.txt")
        #expect(FileNaming.safeBaseName("del\u{7F}.txt") == "del_.txt")
        #expect(FileNaming.safeBaseName("csi\u{9B}.txt") == "csi_.txt")
        #expect(FileNaming.safeBaseName("line\nbreak\r.txt") == "line_break_.txt")
        #expect(FileNaming.safeBaseName("\u{1B}") == "_")
    }

    @Test func bidiControls() {
        // "invoice‮fdp.exe" would display as "invoiceexe.pdf"
        #expect(FileNaming.safeBaseName("invoice\u{202E}fdp.exe") == "invoice_fdp.exe")
        for scalar: UInt32 in [0x061C, 0x200E, 0x200F, 0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2066, 0x2067, 0x2068, 0x2069] {
            let c = String(Character(Unicode.Scalar(scalar)!))
            #expect(FileNaming.safeBaseName("a\(c)b") == "a_b")
        }
    }

    @Test func leadingAndTrailingJunk() {
        #expect(FileNaming.safeBaseName("-rf") == "rf")
        #expect(FileNaming.safeBaseName("--help") == "help")
        #expect(FileNaming.safeBaseName(".hidden") == "hidden")
        #expect(FileNaming.safeBaseName("   spaces   ") == "spaces")
        #expect(FileNaming.safeBaseName(" .- .name.txt. . ") == "name.txt")
        #expect(FileNaming.safeBaseName("trailing-") == "trailing-")
        #expect(FileNaming.safeBaseName("\u{3000}ideographic\u{3000}") == "ideographic")
        #expect(FileNaming.safeBaseName("--") == nil)
    }

    @Test func plainNamesUnchanged() {
        for name in ["report.pdf", "数.bin", "emoji 😀.png", "a b c", "x.tar.gz", "name_with-dash.txt"] {
            #expect(FileNaming.safeBaseName(name) == name)
        }
    }

    @Test func longASCIINameKeepsExtension() {
        let name = String(repeating: "a", count: 300) + ".bin"
        let safe = FileNaming.safeBaseName(name)!
        #expect(safe.utf8.count == 250)
        #expect(safe.hasSuffix(".bin"))
        #expect(safe == String(repeating: "a", count: 246) + ".bin")
    }

    @Test func longNameKeepsCompoundExtension() {
        let safe = FileNaming.safeBaseName(String(repeating: "b", count: 300) + ".tar.gz")!
        #expect(safe.utf8.count == 250)
        #expect(safe.hasSuffix("b.tar.gz"))
    }

    @Test func longNameWithoutExtension() {
        let safe = FileNaming.safeBaseName(String(repeating: "c", count: 300))!
        #expect(safe == String(repeating: "c", count: 250))
    }

    @Test func longMultiByteNameNeverSplitsACharacter() {
        // 100 × 3-byte characters = 300 bytes
        let name = String(repeating: "数", count: 100) + ".txt"
        let safe = FileNaming.safeBaseName(name)!
        #expect(safe.utf8.count <= 250)
        #expect(safe.hasSuffix(".txt"))
        #expect(safe == String(repeating: "数", count: 82) + ".txt")  // 82*3 + 4 = 250
        // 4-byte emoji, and multi-scalar emoji (family: 25 bytes each)
        let emoji = FileNaming.safeBaseName(String(repeating: "😀", count: 80))!
        #expect(emoji == String(repeating: "😀", count: 62))
        let family = "👨‍👩‍👧‍👦"
        let fam = FileNaming.safeBaseName(String(repeating: family, count: 20) + ".png")!
        #expect(fam.utf8.count <= 250)
        #expect(fam == String(repeating: family, count: 9) + ".png")
    }

    @Test func longExtensionIsTreatedAsStem() {
        let name = "a." + String(repeating: "e", count: 300)
        let safe = FileNaming.safeBaseName(name)!
        #expect(safe.utf8.count == 250)
        #expect(safe.hasPrefix("a.eee"))
    }

    @Test func truncationDoesNotLeaveTrailingDots() {
        // the suffix after the last dot has white space, so there is no extension; the cut lands after "a."
        let name = String(repeating: "a", count: 249) + ".. x y"
        let safe = FileNaming.safeBaseName(name)!
        #expect(safe == String(repeating: "a", count: 249))
    }

    @Test func hugeCombiningCluster() {
        // one grapheme far longer than 250 bytes: fall back to whole scalars
        let name = "e" + String(repeating: "\u{0301}", count: 200)
        let safe = FileNaming.safeBaseName(name)!
        #expect(safe.utf8.count <= 250)
        #expect(!safe.isEmpty)
    }
}

@Suite struct FileNamingChooseTests {
    let url = URL(string: "http://example.com/path/from-url.zip")!

    @Test func explicitFirst() {
        #expect(FileNaming.chooseName(explicit: "mine.zip", contentDisposition: #"attachment; filename="cd.zip""#, url: url) == "mine.zip")
    }

    @Test func contentDispositionSecond() {
        #expect(FileNaming.chooseName(explicit: nil, contentDisposition: #"attachment; filename="cd.zip""#, url: url) == "cd.zip")
        #expect(FileNaming.chooseName(explicit: "..", contentDisposition: #"attachment; filename="../cd.zip""#, url: url) == "cd.zip")
    }

    @Test func urlThird() {
        #expect(FileNaming.chooseName(explicit: nil, contentDisposition: nil, url: url) == "from-url.zip")
        #expect(FileNaming.chooseName(explicit: nil, contentDisposition: #"attachment; filename="..""#, url: url) == "from-url.zip")
        #expect(FileNaming.chooseName(explicit: nil, contentDisposition: "inline", url: url) == "from-url.zip")
    }

    @Test func fallback() {
        #expect(FileNaming.chooseName(explicit: nil, contentDisposition: nil, url: URL(string: "http://h/")!) == "index.html")
        #expect(FileNaming.chooseName(explicit: nil, contentDisposition: "attachment; filename=...", url: URL(string: "http://h/..%2F")!) == "index.html")
    }

    @Test func resultIsSafe() {
        let name = FileNaming.chooseName(explicit: nil, contentDisposition: "attachment; filename*=UTF-8''%2E%2E%2F%1B%5D0%3Bx%07.sh", url: url)
        #expect(name == "_]0;x_.sh")
    }
}

@Suite struct FileNamingNumberedTests {
    @Test func examples() {
        #expect(FileNaming.numbered("a.bin", 1) == "a (1).bin")
        #expect(FileNaming.numbered("README", 2) == "README (2)")
        #expect(FileNaming.numbered("x.tar.gz", 1) == "x (1).tar.gz")
        #expect(FileNaming.numbered("x.TAR.BZ2", 3) == "x (3).TAR.BZ2")
        #expect(FileNaming.numbered("x.tar.xz", 1) == "x (1).tar.xz")
        #expect(FileNaming.numbered("x.tar.zst", 12) == "x (12).tar.zst")
        #expect(FileNaming.numbered("photo.2024.jpg", 1) == "photo.2024 (1).jpg")
        #expect(FileNaming.numbered("x.gz", 1) == "x (1).gz")
        #expect(FileNaming.numbered("tar.gz", 1) == "tar (1).gz")
        #expect(FileNaming.numbered("v1.2 notes", 1) == "v1.2 notes (1)")
    }

    @Test func nonPositiveLeavesNameAlone() {
        #expect(FileNaming.numbered("a.bin", 0) == "a.bin")
        #expect(FileNaming.numbered("a.bin", -1) == "a.bin")
    }

    @Test func staysWithinLimit() {
        let name = FileNaming.safeBaseName(String(repeating: "a", count: 400) + ".tar.gz")!
        #expect(name.utf8.count == 250)
        let n = FileNaming.numbered(name, 1234)
        #expect(n.utf8.count <= 250)
        #expect(n.hasSuffix("a (1234).tar.gz"))

        let cjk = FileNaming.safeBaseName(String(repeating: "数", count: 100))!
        let m = FileNaming.numbered(cjk, 7)
        #expect(m.utf8.count <= 250)
        #expect(m.hasSuffix("数 (7)"))
        #expect(m.unicodeScalars.allSatisfy { $0 == "数" || " (7)".unicodeScalars.contains($0) })

        let big = FileNaming.numbered(String(repeating: "z", count: 255), Int.max)
        #expect(big.utf8.count <= 250)
        #expect(big.hasSuffix(" (\(Int.max))"))
    }

    /// A name at the limit still has room for the `.part` its file carries while it downloads: together they
    /// are NAME_MAX, 255 bytes (a longer `.part` name is "File name too long", and the download failed).
    @Test func theLimitLeavesRoomForThePartSuffix() throws {
        #expect(FileNaming.maxNameBytes + PartialFile.suffix.utf8.count == 255)
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ferry-names-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let name = try #require(FileNaming.safeBaseName(String(repeating: "é", count: 300) + ".txt"))
        let part = try PartialFile(openingOrCreating: PartialFile.path(directory: dir, name: name), bufferSize: 4096)
        part.close()
        #expect(FileManager.default.fileExists(atPath: dir + "/" + name + PartialFile.suffix))
    }
}

@Suite struct FileNamingResolvesInsideTests {
    /// Creates a fresh temporary directory, runs `body`, removes it.
    func withTempDir(_ body: (String) throws -> Void) throws {
        let dir = FileManager.default.temporaryDirectory
            .appendingPathComponent("ferry-fn-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try body(dir)
    }

    @Test func plainNameIsInside() throws {
        try withTempDir { dir in
            #expect(FileNaming.resolvesInside(directory: dir, name: "file.bin"))
            #expect(FileNaming.resolvesInside(directory: dir + "/", name: "file.bin"))
            #expect(FileNaming.resolvesInside(directory: dir, name: "数 (1).bin"))
        }
    }

    @Test func badNames() throws {
        try withTempDir { dir in
            for name in ["", ".", "..", "../x", "a/b", "/etc/passwd", #"a\b"#, "nul\u{0}x", String(repeating: "a", count: 256)] {
                #expect(!FileNaming.resolvesInside(directory: dir, name: name), "\(name)")
            }
        }
    }

    @Test func missingDirectoryOrFile() throws {
        try withTempDir { dir in
            #expect(!FileNaming.resolvesInside(directory: dir + "/does-not-exist", name: "x"))
            #expect(FileManager.default.createFile(atPath: dir + "/plain", contents: Data()))
            #expect(!FileNaming.resolvesInside(directory: dir + "/plain", name: "x"))
            #expect(!FileNaming.resolvesInside(directory: "", name: "x"))
        }
    }

    @Test func directoryThroughSymlinkIsResolved() throws {
        try withTempDir { dir in
            try FileManager.default.createDirectory(atPath: dir + "/real", withIntermediateDirectories: false)
            try FileManager.default.createSymbolicLink(atPath: dir + "/link", withDestinationPath: dir + "/real")
            #expect(FileNaming.resolvesInside(directory: dir + "/link", name: "x.bin"))
            #expect(FileNaming.resolvesInside(directory: dir + "/real/../link", name: "x.bin"))
        }
    }

    @Test func existingSymlinkEntryIsRefused() throws {
        try withTempDir { dir in
            try FileManager.default.createSymbolicLink(atPath: dir + "/escape", withDestinationPath: "/etc/passwd")
            #expect(!FileNaming.resolvesInside(directory: dir, name: "escape"))
            #expect(FileManager.default.createFile(atPath: dir + "/regular", contents: Data()))
            #expect(FileNaming.resolvesInside(directory: dir, name: "regular"))
        }
    }

    @Test func safeBaseNameOutputsResolveInside() throws {
        try withTempDir { dir in
            for raw in ["../../x.bin", #"C:\evil\x.exe"#, "a/..", "-rf", "\u{1B}]0;t\u{07}", String(repeating: "数", count: 200)] {
                if let safe = FileNaming.safeBaseName(raw) {
                    #expect(FileNaming.resolvesInside(directory: dir, name: safe), "\(raw)")
                }
            }
        }
    }
}

/// A finished file takes its name without ever replacing a file that has it (NameClaims.publish, NameClaims.move).
@Suite struct NamePublishTests {
    static func read(_ path: String) -> String? { try? String(contentsOfFile: path, encoding: .utf8) }

    /// A file that took the name between the claim and the publish (another program's) keeps it and its bytes;
    /// the finished file takes the next free name, and no `.part` file is left.
    @Test func aNameTakenMeanwhileIsNeverReplaced() throws {
        let directory = try FileSyncTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let names = NameClaims()
        let claim = try names.claim(directory: directory, name: "a.bin")
        #expect(claim.name == "a.bin")
        _ = "ours".withCString { write(claim.fd, $0, 4) }
        close(claim.fd)
        try "theirs".write(toFile: directory + "/a.bin", atomically: false, encoding: .utf8)
        #expect(try names.publish(directory: directory, name: "a.bin") == "a (1).bin")
        #expect(Self.read(directory + "/a.bin") == "theirs")
        #expect(Self.read(directory + "/a (1).bin") == "ours")
        #expect(!NameClaims.exists(directory + "/a.bin.part"))
    }

    /// Both ways of moving without replacing: the one-step rename (RENAME_NOREPLACE) and the link then unlink taken
    /// where a file system refuses it; each moves to a free name and refuses a taken one with EEXIST, both files
    /// kept as they were.
    @Test(arguments: [true, false]) func aMoveNeverReplaces(oneStep: Bool) throws {
        let directory = try FileSyncTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try "one".write(toFile: directory + "/from", atomically: false, encoding: .utf8)
        try "two".write(toFile: directory + "/taken", atomically: false, encoding: .utf8)
        #expect(NameClaims.move(directory + "/from", to: directory + "/taken", noReplace: oneStep) == EEXIST)
        #expect(Self.read(directory + "/from") == "one")
        #expect(Self.read(directory + "/taken") == "two")
        #expect(NameClaims.move(directory + "/from", to: directory + "/free", noReplace: oneStep) == 0)
        #expect(Self.read(directory + "/free") == "one")
        #expect(!NameClaims.exists(directory + "/from"))
        #expect(NameClaims.move(directory + "/gone", to: directory + "/other", noReplace: oneStep) == ENOENT)
    }
}
