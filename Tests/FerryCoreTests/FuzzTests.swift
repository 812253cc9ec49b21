import Foundation
import PropertyBased
import Testing
@testable import FerryCore
@testable import FerryEngine
@testable import FerryModel
@testable import FerryStorage
@testable import FerryTransport

/// The torture run's fuzzing campaign: every parser of what a user types or gives (the config file, `-i`
/// files, `-H` and `-F` arguments, rates, schedules, `.netrc` files, hook command lines) gets thousands of
/// generated inputs. None may crash or hang; each error must name its input (the file and line, or the text).
@Suite struct FuzzTests {
    static let count = 2000

    /// The pieces these formats are made of (so the generated inputs reach deep into the parsers), with
    /// stray characters between: controls, quotes, wide and combining characters, escapes, bidi overrides.
    static func pool(_ pieces: [String]) -> [String] {
        pieces + (0..<0x80).map { String(UnicodeScalar(UInt8($0))) }
            + ["é", "数据", "\u{FFFD}", "\u{1B}[2J", "\u{202E}", "🙂", "\u{7F}", "\r\n", "\u{301}", "\u{85}", "\u{2028}"]
    }

    static let tomlPieces = pool(["[", "]", "[[", "]]", "=", " = ", "\"", "'", "\"\"\"", "#", "\n", ",", "{", "}", ".", "-",
                            "transfers", "retry", "network", "limits", "engine", "hooks", "ui", "hosts", "concurrency",
                            "per_host", "segments", "attempts", "idle_timeout", "download", "schedule", "on_done",
                            "timeout", "bell", "color", "match", "headers", "4", "0", "-1", "1e400", "0x10", "3.5",
                            "true", "false", "\"2M\"", "\"08:00,1M\"", "inf", "nan", "9223372036854775808"])

    @Test func theConfigParser() async {
        let pieces = Self.tomlPieces
        await propertyCheck(count: Self.count, input: Gen.int(in: 0...(pieces.count - 1)).array(of: 0...40).map { (indices: [Int]) -> String in indices.map { pieces[$0] }.joined(separator: "") }) { text in
            do {
                _ = try Config.parse(text, file: "fuzz.toml")
            } catch {
                #expect(String(describing: error).hasPrefix("fuzz.toml"), "\(String(describing: error))")
                #expect(!String(describing: error).contains("\u{1B}"), "made safe for a terminal")
            }
        }
    }

    @Test func urlListFiles() async {
        let lines = Self.pool(["http://", "https://", "ftp://", "example.com", "/", "a b", "#", "\n", ":", "@", "?",
                               "%", "%zz", "[::1]", ":80", "user:pw@", "..", "\u{0}"])
        await propertyCheck(count: Self.count, input: Gen.int(in: 0...(lines.count - 1)).array(of: 0...40).map { (indices: [Int]) -> String in indices.map { lines[$0] }.joined(separator: "") }) { text in
            do {
                let urls = try InputValidation.urlList(contents: text, path: "list.txt")
                for url in urls { #expect(TransferScheme(url) != nil, "only the schemes ferry speaks: \(url)") }
            } catch {
                #expect(String(describing: error).contains("list.txt"), "\(String(describing: error))")
            }
        }
    }

    @Test func headerArguments() async {
        let headers = Self.pool(["Authorization", "X-A", ":", ": ", "value", "\r", "\n", "\0", " ", "Bad Name", "(", "é"])
        await propertyCheck(count: Self.count, input: Gen.int(in: 0...(headers.count - 1)).array(of: 0...40).map { (indices: [Int]) -> String in indices.map { headers[$0] }.joined(separator: "") }) { text in
            do {
                let header = try InputValidation.header(text)
                let breaks = header.value.unicodeScalars.contains { $0 == "\r" || $0 == "\n" || $0 == "\0" }
                #expect(!breaks)
                #expect(!header.name.isEmpty)
            } catch {
                #expect(String(describing: error).hasPrefix("bad header '\(TerminalSafe.sanitize(text))'"), "\(String(describing: error))")
            }
        }
    }

    @Test func formArguments() async {
        let forms = Self.pool(["name", "=", "@", "@-", "@/nonexistent-ferry/x", "@/etc/hostname", ";type=", "text/plain",
                               "\r", "\n", ";", "file", "value"])
        await propertyCheck(count: Self.count, input: Gen.int(in: 0...(forms.count - 1)).array(of: 0...40).map { (indices: [Int]) -> String in indices.map { forms[$0] }.joined(separator: "") }) { text in
            do {
                _ = try InputValidation.formPart(text)
            } catch let error as UsageError {
                #expect(String(describing: error).hasPrefix("bad -F '\(TerminalSafe.sanitize(text))'"), "\(String(describing: error))")
            } catch let error as BodyError {
                // A file part whose file cannot be used: the message names the path given.
                // ("name=@." : "cannot upload .: it is a directory", a path with no slash in it.)
                let message = String(describing: error)
                #expect(message.hasPrefix("cannot upload ") || message.contains("/") || message.contains("file"), "\(message)")
            } catch {
                Issue.record("unexpected \(error)")
            }
        }
    }

    @Test func ratesAndSchedules() async {
        let rates = Self.pool(["0", "1", "1.5", "500", "K", "M", "G", "k", "m", "off", "none", "-", ".", "e9", "1e400",
                               "99999999999999999999", " ", ",", ":", "08:00", "23:59", "24:00", "nan"])
        await propertyCheck(count: Self.count, input: Gen.int(in: 0...(rates.count - 1)).array(of: 0...40).map { (indices: [Int]) -> String in indices.map { rates[$0] }.joined(separator: "") }) { text in
            do {
                if let rate = try RateText.parse(text) { #expect(rate > 0) }
            } catch {
                let message = String(describing: error)
                let trimmed = TerminalSafe.sanitize(text.trimmingCharacters(in: .whitespaces))
                let named = message.contains("'" + trimmed + "'") || message.contains(TerminalSafe.sanitize(text))
                #expect(named, "\(message)")
            }
            do {
                _ = try LimitSchedule.parse(text)
            } catch {
                #expect(!String(describing: error).isEmpty)
                #expect(!String(describing: error).contains("\u{1B}"))
            }
        }
    }

    @Test func netrcFilesAndHookCommands() async {
        let netrc = Self.pool(["machine", "default", "login", "password", "account", "macdef", "port", "host", "\n",
                               "\n\n", " ", "\"", "\\", "#", "MACHINE"])
        await propertyCheck(count: Self.count, input: Gen.int(in: 0...(netrc.count - 1)).array(of: 0...40).map { (indices: [Int]) -> String in indices.map { netrc[$0] }.joined(separator: "") }) { text in
            do {
                _ = try Netrc.parse(text, file: "fuzz.netrc")
            } catch {
                #expect(String(describing: error).hasPrefix("fuzz.netrc:"), "\(String(describing: error))")
            }
            do {
                _ = try HookSettings.words(text)
            } catch {
                #expect(String(describing: error).hasPrefix("a "), "\(String(describing: error))")
            }
        }
    }
}
