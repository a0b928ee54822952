#!/usr/bin/env bash
# Checks the include rule of DESIGN.md: a layer includes only layers above it in this order, and only the
# primitive layer (cuda/) includes CUDA runtime/driver headers. Prints each violation; exits 1 if any.
set -uo pipefail
cd "$(dirname "$0")/.."
layers=(core cuda mr manager array nrt strings buffer column frame interop python)
rank() { local i; for i in "${!layers[@]}"; do [ "${layers[$i]}" = "$1" ] && { echo "$i"; return; }; done; echo 99; }
bad=0
for dir in include/gpumem src; do
  while IFS= read -r file; do
    rel=${file#"$dir"/}
    [ "$dir" = include/gpumem ] || rel=${file#src/}
    layer=${rel%%/*}
    own=$(rank "$layer")
    while IFS= read -r inc; do
      target=${inc#gpumem/}
      target=${target%%/*}
      if [ "$(rank "$target")" -gt "$own" ]; then
        echo "layer violation: $file ($layer) includes <$inc> ($target)"
        bad=1
      fi
    done < <(grep -oE '#include[[:space:]]*<gpumem/[a-z_]+/[^>]+>' "$file" | sed -E 's/.*<(.*)>/\1/')
    if [ "$layer" != cuda ] && grep -qE '#include[[:space:]]*[<"](cuda_runtime|cuda_runtime_api|cuda|driver_types)\.h' "$file"; then
      echo "CUDA header outside the primitive layer: $file"
      bad=1
    fi
  done < <(find "$dir" -type f \( -name '*.hpp' -o -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' \))
done
[ $bad -eq 0 ] && echo "layers: ok"
exit $bad
