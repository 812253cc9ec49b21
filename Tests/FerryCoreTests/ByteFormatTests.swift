import Foundation
import Testing
@testable import FerryCore
@testable import FerryEngine
@testable import FerryModel
@testable import FerryStorage
@testable import FerryTransport

@Suite struct ByteFormatTests {
    /// Issue 41: at 80 columns the size column (15) cut `300.0 KiB/1.0 GiB` to `300.0 KiB/1.0 …`: short units
    /// keep both figures and the total's unit.
    @Test func progressFitsItsColumnWithShortUnits() {
        #expect(ByteFormat.progress(300 << 10, of: 1 << 30, fitting: 15) == "300.0K/1.0G")
        #expect(ByteFormat.progress(300 << 10, of: 1 << 30, fitting: 21) == "300.0 KiB/1.0 GiB")
        #expect(ByteFormat.progress(30 << 20, of: 100 << 20, fitting: 15) == "30.0/100.0 MiB")
        #expect(ByteFormat.progress(1023, of: 1 << 30, fitting: 10) == "1023B/1.0G")
        #expect(ByteFormat.progress(1023 * 1024 + 900, of: 1023 * 1024 * 1024 + 900 * 1024, fitting: 15).count <= 15)
    }

    @Test func bytes() {
        #expect(ByteFormat.bytes(0) == "0 B")
        #expect(ByteFormat.bytes(1) == "1 B")
        #expect(ByteFormat.bytes(1023) == "1023 B")
        #expect(ByteFormat.bytes(1024) == "1.0 KiB")
        #expect(ByteFormat.bytes(1536) == "1.5 KiB")
        #expect(ByteFormat.bytes(10 * 1024 * 1024) == "10.0 MiB")
        #expect(ByteFormat.bytes(1_288_490_189) == "1.2 GiB")
        #expect(ByteFormat.bytes(3 * 1024 * 1024 * 1024 * 1024) == "3.0 TiB")
        #expect(ByteFormat.bytes(5 * 1024 * 1024 * 1024 * 1024 * 1024) == "5.0 PiB")
        #expect(ByteFormat.bytes(Int64.max) == "8.0 EiB")
    }

    @Test func roundingCarriesToNextUnit() {
        #expect(ByteFormat.bytes(1024 * 1024 - 1) == "1.0 MiB")
        #expect(ByteFormat.bytes(1024 * 1024 - 60) == "1023.9 KiB")
        #expect(ByteFormat.bytes(1024 * 1024 * 1024 - 1) == "1.0 GiB")
    }

    @Test func negative() {
        #expect(ByteFormat.bytes(-1536) == "-1.5 KiB")
        #expect(ByteFormat.bytes(-5) == "-5 B")
        #expect(ByteFormat.bytes(Int64.min) == "-8.0 EiB")
    }

    @Test func rate() {
        #expect(ByteFormat.rate(12.3 * 1024 * 1024) == "12.3 MiB/s")
        #expect(ByteFormat.rate(0) == "0 B/s")
        #expect(ByteFormat.rate(512.4) == "512 B/s")
        #expect(ByteFormat.rate(1023.6) == "1.0 KiB/s")
        #expect(ByteFormat.rate(1536) == "1.5 KiB/s")
        // From 1000 of a unit, no tenth: at most 11 columns ("999.9 KiB/s"), the width a row gives a rate.
        #expect(ByteFormat.rate(1009.7 * 1024) == "1010 KiB/s")
        #expect(ByteFormat.rate(999.94 * 1024) == "999.9 KiB/s")
        #expect(ByteFormat.rate(1023.94 * 1024 * 1024) == "1024 MiB/s")
        #expect(ByteFormat.rate(1023.96 * 1024 * 1024) == "1.0 GiB/s")
        // Every width from bytes to tebibytes a second, a thousand steps per factor of 10.
        let widest = (0..<13_000).map { ByteFormat.rate(pow(10, Double($0) / 1000)) }.max { $0.count < $1.count } ?? ""
        #expect(widest.count <= 11, "\(widest)")
        #expect(ByteFormat.rate(-5) == "0 B/s")
        #expect(ByteFormat.rate(.nan) == "0 B/s")
        #expect(ByteFormat.rate(.infinity) == "0 B/s")
        #expect(ByteFormat.rate(-.infinity) == "0 B/s")
        #expect(ByteFormat.rate(1e300) == "8.0 EiB/s")
        #expect(ByteFormat.rate(.leastNonzeroMagnitude) == "0 B/s")
    }

    @Test func duration() {
        #expect(ByteFormat.duration(0) == "0s")
        #expect(ByteFormat.duration(5) == "5s")
        #expect(ByteFormat.duration(59) == "59s")
        #expect(ByteFormat.duration(60) == "1m00s")
        #expect(ByteFormat.duration(65) == "1m05s")
        #expect(ByteFormat.duration(3599) == "59m59s")
        #expect(ByteFormat.duration(3600) == "1h00m")
        #expect(ByteFormat.duration(3725) == "1h02m")
        #expect(ByteFormat.duration(99 * 3600 + 59 * 60 + 59) == "99h59m")
        #expect(ByteFormat.duration(100 * 3600) == "99h+")
        #expect(ByteFormat.duration(359_999.6) == "99h+")
        #expect(ByteFormat.duration(1e300) == "99h+")
        #expect(ByteFormat.duration(.infinity) == "--")
        #expect(ByteFormat.duration(.nan) == "--")
        #expect(ByteFormat.duration(-1) == "--")
        #expect(ByteFormat.duration(4.6) == "5s")
        #expect(ByteFormat.duration(59.6) == "1m00s")
    }

    @Test func localeIndependent() {
        // No Foundation formatting is involved: always "." as decimal separator.
        #expect(ByteFormat.bytes(1536).contains("."))
        #expect(!ByteFormat.rate(1536).contains(","))
    }
}
