// gpumem/strings/functions.hpp
//
// Every string function of the strings layer in one include: Python's str methods for device
// code (GPUMEM_HD), on string_view arguments, returning views, numbers, result<T>, string_list or
// udf_string as each header says. docs/strings.md lists them with their Python equivalents.
//
//   #include <gpumem/strings/functions.hpp>
//   using namespace gpumem::strings;
//   udf_string r = replace(strip(s), ",", ";");
//
// Including one header instead (search.hpp, strip.hpp, ...) compiles less. Functions that build
// strings allocate from the NRT heap: run them with nrt::launch. Nothing throws.
#pragma once

#include <gpumem/strings/case.hpp>
#include <gpumem/strings/combine.hpp>
#include <gpumem/strings/convert.hpp>
#include <gpumem/strings/pad.hpp>
#include <gpumem/strings/predicates.hpp>
#include <gpumem/strings/replace.hpp>
#include <gpumem/strings/search.hpp>
#include <gpumem/strings/slice.hpp>
#include <gpumem/strings/split.hpp>
#include <gpumem/strings/strip.hpp>
