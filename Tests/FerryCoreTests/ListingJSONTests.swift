import FerryCore
import Foundation
import Synchronization
import Testing

/// `ferry list --json` writes its entries by hand (QueueListing.json): what it writes must be the JSON a
/// parser reads back as the item's fields, whatever text a server or a user put in them.
@Suite struct ListingJSONTests {
    private func listed(_ items: [StoredTransfer]) throws -> [[String: Any]] {
        let out = Mutex(Data())
        let stream = QueueListing.Stream(json: true) { data in out.withLock { $0.append(data) } }
        stream.add(items)
        stream.finish()
        let text = out.withLock { $0 }
        return try #require(try JSONSerialization.jsonObject(with: text) as? [[String: Any]])
    }

    @Test func everyFieldReadsBackWhateverItsText() throws {
        let texts = ["plain", "quo\"te", "back\\slash", "tab\there", "line\nbreak", "\u{01}\u{1F}\u{7F}", "é ü 日本 🚀",
                     "/a/b/", "", "\\u0041", "{\"x\": [1]}"]
        var items: [StoredTransfer] = []
        for (index, text) in texts.enumerated() {
            var spec = TransferSpec(download: URL(string: "http://h/x\(index)")!, directory: "/d/" + text)
            spec.headers = text.isEmpty ? [] : [HTTPHeader(name: "X-" + String(index), value: text), HTTPHeader(name: "Y", value: "v")]
            var item = StoredTransfer(id: TransferID(Int64(index + 1)), position: index, spec: spec, state: .failed)
            item.fileName = "f" + text
            item.lastError = text
            item.bytesDone = Int64(index)
            item.bytesExpected = index.isMultiple(of: 2) ? 100 : nil
            item.batch = index.isMultiple(of: 3) ? nil : 4
            items.append(item)
        }
        let upload = TransferSpec(upload: UploadSpec(method: "PUT", body: .raw(.file(path: "/src/a\"b"), contentType: "x/y")),
                                  to: URL(string: "http://u:secret@h/up")!)
        items.append(StoredTransfer(id: TransferID(99), position: 99, spec: upload))
        // A resumable upload: its protocol, its location without credentials or escapes, the confirmed offset.
        var resumable = StoredTransfer(id: TransferID(100), position: 100, spec: upload)
        resumable.resumable = ResumableUpload(kind: .tus)
        resumable.resumable?.location = "https://me:pw@tus.example/files/7\u{1B}[2J"
        resumable.resumable?.confirmedOffset = 4096
        items.append(resumable)

        let objects = try listed(items)
        #expect(objects.count == items.count)
        for (object, item) in zip(objects, items) {
            #expect(object["id"] as? Int64 == item.id.rawValue)
            #expect(object["state"] as? String == item.state.rawValue)
            #expect(object["bytes"] as? Int64 == item.bytesDone)
            #expect(object["total"] as? Int64 == item.total)
            #expect(object["batch"] as? Int64 == item.batch)
            #expect(object["lastError"] as? String == item.lastError.map { TerminalSafe.sanitize($0) })
            #expect(object["headers"] as? [String] == item.spec.headers.map(\.name))
            #expect(object["url"] as? String == TerminalSafe.redactedURL(item.spec.url))
            if item.spec.direction == .download {
                #expect(object["destination"] as? String == TerminalSafe.sanitize(item.spec.directory + "/" + item.fileName!))
                #expect(object["source"] == nil && object["method"] == nil)
            } else {
                #expect(object["source"] as? String == "/src/a\"b")
                #expect(object["method"] as? String == "PUT")
                #expect(object["destination"] == nil)
            }
        }
        // A URL's credentials never appear.
        #expect(objects.last?["url"] as? String == "http://h/up")
        #expect(objects.last?["resumable"] as? String == "tus")
        #expect(objects.last?["location"] as? String == TerminalSafe.sanitize("https://tus.example/files/7\u{1B}[2J"))
        #expect((objects.last?["location"] as? String)?.contains("\u{1B}") == false)
        #expect(objects.last?["confirmed"] as? Int64 == 4096)
        #expect(objects.dropLast().allSatisfy { $0["resumable"] == nil && $0["location"] == nil && $0["confirmed"] == nil })
        // A tus upload's URL gets a POST (the bytes go by PATCH to the upload it makes), whatever -X said.
        var tus = upload
        tus.upload?.resumable = .tus
        #expect(try listed([StoredTransfer(id: TransferID(101), position: 101, spec: tus)]).first?["method"] as? String == "POST")
    }

    @Test func theLayoutIsAPrettyPrintedArrayWithSortedKeys() throws {
        var item = StoredTransfer(id: TransferID(3), position: 0, spec: TransferSpec(download: URL(string: "http://h/a.bin")!, directory: "/d"))
        item.batch = 2
        let out = Mutex(Data())
        let stream = QueueListing.Stream(json: true) { data in out.withLock { $0.append(data) } }
        stream.add([item])
        stream.finish()
        #expect(String(decoding: out.withLock { $0 }, as: UTF8.self) == """
            [
              {
                "attempts" : 0,
                "batch" : 2,
                "bytes" : 0,
                "destination" : "/d",
                "direction" : "download",
                "headers" : [

                ],
                "id" : 3,
                "retries" : 0,
                "state" : "queued",
                "url" : "http://h/a.bin"
              }
            ]

            """)
    }
}
