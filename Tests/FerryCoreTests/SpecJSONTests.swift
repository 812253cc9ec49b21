import Foundation
import PropertyBased
import Testing
@testable import FerryModel
@testable import FerryStorage

/// The store's own reading of a download's spec (SpecJSON) against JSONDecoder, the format's definition: the same
/// spec from the same text, or no answer (and JSONDecoder reads it).
@Suite struct SpecJSONTests {
    static func encoded(_ spec: TransferSpec) throws -> String {
        String(decoding: try JSONEncoder().encode(spec), as: UTF8.self)
    }

    static func viaJSONDecoder(_ text: String) -> TransferSpec? {
        try? JSONDecoder().decode(TransferSpec.self, from: Data(text.utf8))
    }

    /// Text the store may hold in a name, a directory or a header: escapes JSONEncoder writes, controls, quotes,
    /// slashes, wide and combining characters, an astral one (a surrogate pair when escaped).
    static let awkward = ["plain", "a b", "é", "数据", "🙂", "\u{301}", "\"", "\\", "/", "\n", "\r\t", "\u{0}", "\u{1F}", "\u{7F}",
                          "\u{2028}", "\u{FFFD}", "%2F", "..", "ü.bin", ""]

    @Test func everyDownloadShapeReadsAsJSONDecoderReadsIt() async throws {
        let pieces = Self.awkward
        let text = Gen.int(in: 0...(pieces.count - 1)).array(of: 0...6).map { (indices: [Int]) -> String in indices.map { pieces[$0] }.joined() }
        await propertyCheck(count: 500, input: text, text, Gen.int(in: 0...255), Gen.int(in: -5...Int(Int32.max))) { directory, name, flags, number in
            let url = [URL(string: "ferry:url-column")!, URL(string: "https://h.example/a%20b/%C3%A9?q=1&r=%22")!][abs(number) % 2]
            var spec = TransferSpec(download: url, directory: "/tmp/" + directory)
            if flags & 1 != 0 { spec.fileName = name }
            if flags & 2 != 0 { spec.sha256 = String(repeating: "aB", count: 32) }
            if flags & 4 != 0 { spec.segments = number }
            if flags & 8 != 0 { spec.rateLimit = Int64(number) * 1_000 }
            if flags & 16 != 0 { spec.netrcFile = "/home/" + name + "/.netrc" }
            if flags & 32 != 0 { spec.sshAgent = "/run/" + directory }
            if flags & 64 != 0 { spec.headers = [HTTPHeader(name: "X-" + String(number), value: name), HTTPHeader(name: "Cookie", value: directory)] }
            if flags & 128 != 0 {
                spec.mirror = .init(size: number % 3 == 0 ? nil : Int64(number) << 8,
                                    modified: number % 5 == 0 ? nil : Date(timeIntervalSinceReferenceDate: Double(number) / 7),
                                    replacesAnyFile: number % 2 == 0)
            }
            let text = try! Self.encoded(spec)
            let fast = SpecJSON.decodeDownload(text)
            #expect(fast != nil, "a download spec as the store writes it is read without JSONDecoder: \(text)")
            #expect(fast == Self.viaJSONDecoder(text), "\(text)")
            #expect(fast?.sha256 == spec.sha256, "as written, not lowercased again")
            // Written by SpecJSON: both readers read back the spec it was.
            let written = SpecJSON.encodeDownload(spec)
            #expect(written != nil)
            #expect(Self.viaJSONDecoder(written ?? "") == spec, "\(written ?? "")")
            #expect(SpecJSON.decodeDownload(written ?? "") == spec, "\(written ?? "")")
        }
    }

    @Test func anotherShapeIsLeftToJSONDecoder() throws {
        // An upload, a key the fast path does not know, a number of another shape, a value of another type: nil,
        // and `decode` reads them as JSONDecoder does (or throws as it does).
        let upload = TransferSpec(upload: UploadSpec(method: "PUT", body: .raw(.file(path: "/tmp/a"), contentType: "application/octet-stream")), to: URL(string: "https://h/a")!)
        let uploadText = try Self.encoded(upload)
        #expect(SpecJSON.decodeDownload(uploadText) == nil)
        #expect(SpecJSON.encodeDownload(upload) == nil, "an upload's is JSONEncoder's")
        #expect(try SpecJSON.decode(uploadText) == upload)
        let others = [
            #"{"direction":"download","url":"ferry:url-column","headers":[],"directory":"/d","future":1}"#,
            #"{"direction":"download","url":"ferry:url-column","headers":[],"directory":"/d","segments":4.0}"#,
            #"{"direction":"download","url":"ferry:url-column","headers":[],"directory":"/d","segments":4e0}"#,
            #"{"direction":"download","url":"ferry:url-column","headers":[],"directory":"/d","fileName":7}"#,
            #"{"direction":"download","url":"ferry:url-column","headers":{},"directory":"/d"}"#,
            #"{"direction":"download","url":"ferry:url-column","headers":[],"directory":"/d","mirror":{"size":1,"x":2}}"#,
        ]
        for text in others {
            #expect(SpecJSON.decodeDownload(text) == nil, "\(text)")
            #expect((try? SpecJSON.decode(text)) == Self.viaJSONDecoder(text), "\(text)")
        }
    }

    @Test func brokenTextIsNeverReadAsASpec() {
        let good = #"{"direction":"download","url":"ferry:url-column","headers":[{"name":"A","value":"\u00e9\/\ud83d\ude42"}],"directory":"\/d","mirror":{"modified":8.5e8,"size":-0},"fileName":null}"#
        let read = SpecJSON.decodeDownload(good)
        #expect(read != nil)
        #expect(read == Self.viaJSONDecoder(good))
        #expect(read?.headers.first?.value == "é/🙂")
        // Each cut of it is refused.
        for end in 0..<good.utf8.count {
            let cut = String(decoding: Array(good.utf8)[..<end], as: UTF8.self)
            #expect(SpecJSON.decodeDownload(cut) == nil, "\(cut)")
        }
        for bad in [#"{"direction":"download","url":"ferry:url-column","headers":[],"directory":"/d","segments":01}"#,
                    #"{"direction":"download","url":"ferry:url-column","headers":[],"directory":"/d","segments":-}"#,
                    #"{"direction":"download","url":"ferry:url-column","headers":[],"directory":"/d\ud800"}"#,
                    #"{"direction":"download","url":"ferry:url-column","headers":[],"directory":"/d\q"}"#,
                    "{\"direction\":\"download\",\"url\":\"ferry:url-column\",\"headers\":[],\"directory\":\"/d\u{1}\"}",
                    #"{"direction":"download","url":"ferry:url-column","headers":[],"directory":"/d"} x"#,
                    #"{"direction":"download","url":"ferry:url-column","headers":[],"directory":"/d",}"#] {
            #expect(SpecJSON.decodeDownload(bad) == nil, "\(bad)")
            // JSONDecoder has the last word (it takes a trailing comma, and refuses the rest).
            #expect((try? SpecJSON.decode(bad)) == Self.viaJSONDecoder(bad), "\(bad)")
        }
    }
}
